package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// need is what identity a tool needs.
type need int

const (
	needNothing need = iota // whoami
	needTeam                // read-only tools
	needMember              // member and lead tools
)

// Inbox and replay limits (spec §12.6.3).
const (
	inboxDefault = 20
	inboxMax     = 50
	waitMax      = 60
	replayMax    = 100
)

// handler is a tool body: it gets the resolved identity and returns the
// structured output and a short text.
type handler[In, Out any] func(ctx context.Context, req *mcp.CallToolRequest, id Identity, in In) (Out, string, error)

// add registers a tool whose handler runs only with the identity it needs.
// The SDK encodes Out as the structured content and validates it against
// the output schema it inferred from Out.
func add[In, Out any](s *Server, t *mcp.Tool, n need, h handler[In, Out]) {
	mcp.AddTool(s.srv, t, guard(s, t.Name, n, func(ctx context.Context, req *mcp.CallToolRequest, id Identity, in In) (*mcp.CallToolResult, Out, error) {
		out, text, err := h(ctx, req, id, in)
		if err != nil {
			var zero Out
			return nil, zero, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
	}))
}

// resultHandler is a tool body that builds its whole result: the text and
// the structured content, a value of the tool's Out type.
type resultHandler[In any] func(ctx context.Context, req *mcp.CallToolRequest, id Identity, in In) (*mcp.CallToolResult, error)

// addResult registers a tool like add whose handler builds its own result.
// The SDK validates the arguments as for add and advertises the output
// schema inferred from Out, but passes the result through: it does not
// encode the structured content to JSON and decode it again to validate
// it against the schema (for inbox, ~60 KiB of JSON a call, walked as
// maps), and the content is encoded once, with the response. A value of
// type Out matches the inferred schema by construction; the tests
// validate results against the advertised schema.
func addResult[In, Out any](s *Server, t *mcp.Tool, n need, h resultHandler[In]) {
	schema, err := jsonschema.For[Out](&jsonschema.ForOptions{})
	if err != nil {
		panic(fmt.Sprintf("tool %q: output schema: %v", t.Name, err))
	}
	tt := *t
	tt.OutputSchema = schema
	// With Out any and a nil out the SDK leaves the result as it is.
	mcp.AddTool(s.srv, &tt, guard(s, t.Name, n, func(ctx context.Context, req *mcp.CallToolRequest, id Identity, in In) (*mcp.CallToolResult, any, error) {
		res, err := h(ctx, req, id, in)
		return res, nil, err
	}))
}

// guard wraps a tool body: the call timeout, the identity the tool needs,
// a debug log line, and errors classed for the agent.
func guard[In, Out any](s *Server, name string, n need, body func(ctx context.Context, req *mcp.CallToolRequest, id Identity, in In) (*mcp.CallToolResult, Out, error)) mcp.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		var zero Out
		if s.cfg.CallTimeout > 0 {
			d := s.cfg.CallTimeout
			if name == "inbox" {
				d += waitMax * time.Second
			}
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, d)
			defer cancel()
		}
		id, err := s.identity(ctx)
		if err != nil {
			return nil, zero, s.classed(ctx, Identity{}, fmt.Errorf("resolve identity: %w", err))
		}
		switch {
		case n == needMember && !id.Bound():
			return nil, zero, s.classed(ctx, id, errNotBound)
		case n == needTeam && id.Team == "":
			return nil, zero, s.classed(ctx, id, errNoTeam)
		}
		start := time.Now()
		res, out, err := body(ctx, req, id, in)
		s.cfg.Logger.Debug("tool call", "tool", name, "took", time.Since(start), "ok", err == nil)
		if err != nil {
			s.cfg.Logger.Debug("tool error", "tool", name, "team", id.Team, "member", id.Member, "err", err)
			return nil, zero, s.classed(ctx, id, err)
		}
		return res, out, nil
	}
}

func readOnly(name, desc string) *mcp.Tool {
	return &mcp.Tool{Name: name, Description: desc, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)}}
}

func action(name, desc string, idempotent bool) *mcp.Tool {
	return &mcp.Tool{Name: name, Description: desc, Annotations: &mcp.ToolAnnotations{IdempotentHint: idempotent, DestructiveHint: new(false), OpenWorldHint: new(false)}}
}

// LeadTools are listed only for member lead.
var LeadTools = []string{"task_add", "task_reassign", "team_resume", "team_probe"}

// addTools registers the tools of the configured set (the lead tools are
// added once the identity is the lead).
func (s *Server) addTools() {
	add(s, readOnly("whoami", "Who this session acts as: team, member, role, incarnation (epoch), status, and the task it holds. Works before identity is bound."), needNothing, s.whoami)
	add(s, readOnly("read_message", "The whole message with this seq (inbox shows long bodies cut)."), needMember, s.readMessage)
	add(s, readOnly("task_list", "The team's tasks, optionally only those with one status."), needTeam, s.taskList)
	add(s, readOnly("task_show", "One task with its last checkpoint."), needTeam, s.taskShow)
	add(s, readOnly("team_status", "The team at a glance: members with status, epoch, task and liveness; task counts; progress."), needTeam, s.teamStatus)
	add(s, readOnly("brief", "The brief of a member (default: you): role, task, checkpoint, dependencies, recent mail. Read it after a restart."), needTeam, s.brief)
	add(s, readOnly("replay", "The team's mailbox in seq order, for audit (at most 100 messages)."), needTeam, s.replay)
	if s.cfg.Tools == ToolsReadOnly {
		return
	}
	add(s, action("send", "Store a message for a member, the lead or all. The result says \"stored\", never \"delivered\": delivery is the recipient's ack. With an id, a retry stores nothing new.", true), needMember, s.send)
	addResult[InboxIn, InboxOut](s, action("inbox", "Your unacknowledged mail, oldest first. ack:false (default) is a peek: the mail stays for the next read. ack:true acknowledges exactly the returned messages once this result is delivered.", false), needMember, s.inbox)
	add(s, action("ack", "Acknowledge handled mail by seq. Final; acking twice is harmless.", true), needMember, s.ack)
	add(s, action("task_next", "Claim the best available task (the one that unblocks the most work, then priority, then age). No task is not an error: task is absent and reason says why.", false), needMember, s.taskNext)
	add(s, action("task_claim", "Claim a task by id. Of concurrent claimers exactly one wins; the others get [conflict].", false), needMember, s.taskClaim)
	add(s, action("task_release", "Give your task back to the queue, keeping its checkpoint.", false), needMember, s.taskRelease)
	add(s, action("task_complete", "Complete your task; tasks waiting on it become available. Completing twice is harmless.", true), needMember, s.taskComplete)
	add(s, action("task_fail", "Record a failed attempt: the task goes back to the queue, or is paused after max-attempts.", false), needMember, s.taskFail)
	add(s, action("task_block", "Mark your task blocked on another task or on a reason.", false), needMember, s.taskBlock)
	add(s, action("checkpoint", "Record your progress on your task so a replacement continues without redoing work.", true), needMember, s.checkpoint)
}

// addLeadTools registers the lead tools.
func (s *Server) addLeadTools() {
	add(s, action("task_add", "Lead: add a task (pending until its dependencies are complete).", false), needMember, s.taskAdd)
	add(s, action("task_reassign", "Lead: hand a task to another member.", false), needMember, s.taskReassign)
	add(s, action("team_resume", "Lead: resume the team with this session as its lead (runs the resume checks; the old lead is fenced).", false), needMember, s.teamResume)
	add(s, readOnly("team_probe", "Lead: what a resume would find: members, tasks, warnings, the mailbox tail; whether a new lead session could resume now, and if not why and when (decision, why, resumable_at)."), needMember, s.teamProbe)
	s.addSpawnTool()
}

func (s *Server) whoami(ctx context.Context, _ *mcp.CallToolRequest, id Identity, _ Empty) (WhoamiOut, string, error) {
	if !id.Bound() {
		out := WhoamiOut{Team: id.Team, Hint: strings.TrimPrefix(errorText(errNotBound), "[permanent] ")}
		return out, out.Hint, nil
	}
	v, err := s.team.show(ctx, id.Actor())
	if err != nil {
		return WhoamiOut{}, "", err
	}
	out := WhoamiOut{Bound: true, Team: id.Team, Member: id.Member, Session: id.Session}
	if v.Lead != nil {
		out.LeadOnline = v.Lead.Online
	}
	var current string
	var epoch int64
	if id.Member == teambus.Lead {
		out.Role = "lead"
		if v.Lead != nil {
			current, epoch = v.Lead.Session, v.Lead.Epoch
			out.Status = "offline"
			if v.Lead.Online {
				out.Status = "online"
			}
		}
	} else {
		i := slices.IndexFunc(v.Members, func(m team.MemberView) bool { return m.ID == id.Member })
		if i < 0 {
			return WhoamiOut{}, "", teambus.NotFoundf("member %s not found in team %s: check TEAMBUS_MEMBER", id.Member, id.Team)
		}
		m := v.Members[i]
		out.Role, out.Status, out.Zombie = "teammate", string(m.Status), m.Status == teambus.MemberZombie
		current, epoch = m.Session, m.Epoch
		if m.Task != nil {
			if j := slices.IndexFunc(v.Tasks, func(t *teambus.Task) bool { return t.ID == *m.Task }); j >= 0 {
				out.Task = taskOut(v.Tasks[j])
			}
		}
	}
	out.Epoch = epoch
	text := fmt.Sprintf("you are %s (%s) of team %s, epoch %d, status %s", id.Member, out.Role, id.Team, epoch, out.Status)
	if current != "" && current != id.Session {
		out.Hint = fmt.Sprintf("[conflict] this session was replaced by incarnation %d: stop acting as %s", epoch, id.Member)
		text += "; " + out.Hint
	}
	if out.Task != nil {
		text += fmt.Sprintf("; task %s (%s)", out.Task.ID, out.Task.Status)
	}
	if out.Zombie {
		text += "; zombie mode: the lead is gone, your mail is held until a lead re-attaches"
	}
	return out, text, nil
}

func (s *Server) send(ctx context.Context, _ *mcp.CallToolRequest, id Identity, in SendIn) (SendOut, string, error) {
	req := teamapi.SendRequest{To: in.To, ID: in.ID, Body: in.Body, Type: teambus.MessageType(in.Type)}
	if in.Data != nil {
		b, err := json.Marshal(in.Data)
		if err != nil {
			return SendOut{}, "", teambus.Invalidf("invalid data: %w", err)
		}
		req.Data = b
	}
	res, err := s.team.send(ctx, id.Actor(), req)
	if err != nil {
		return SendOut{}, "", err
	}
	out := SendOut{Seq: res.Seq, ID: res.ID, Duplicate: res.Duplicate, Held: res.Held}
	text := fmt.Sprintf("stored seq %d for %s", res.Seq, cleanLine(in.To))
	if res.Duplicate {
		text += " (duplicate: stored before, nothing new)"
	}
	if res.Held {
		text += " (held: you are in zombie mode; delivered when a lead re-attaches)"
	}
	return out, text, nil
}

func (s *Server) inbox(ctx context.Context, req *mcp.CallToolRequest, id Identity, in InboxIn) (*mcp.CallToolResult, error) {
	if in.Limit < 0 || in.WaitSeconds < 0 {
		return nil, teambus.Invalidf("invalid inbox limit %d or wait_seconds %d: must not be negative", in.Limit, in.WaitSeconds)
	}
	limit := in.Limit
	if limit == 0 {
		limit = inboxDefault
	}
	limit = min(limit, inboxMax)
	wait := time.Duration(min(in.WaitSeconds, waitMax)) * time.Second
	key := callKey(req)
	if in.Ack && key == "" {
		return nil, teambus.Unavailablef("inbox with ack:true needs the server's ack-after-write transport: nothing leased")
	}
	if !in.Ack {
		// A peek: the member API reads the mail and releases it in one step,
		// before it answers; nothing is held.
		msgs, err := s.team.peek(ctx, id.Actor(), limit, waitMS(wait))
		if err != nil {
			return nil, err
		}
		return s.acks.presplice(key, sessionOf(req), inboxResult(inboxOut(msgs, limit), false)), nil
	}
	l, err := s.team.lease(ctx, id.Actor(), limit, waitMS(wait))
	if err != nil {
		return nil, err
	}
	msgs := l.Messages()
	out := inboxOut(msgs, limit)
	switch {
	case ctx.Err() != nil:
		_ = l.Release(context.WithoutCancel(ctx)) // unreleased mail comes back after the ack wait
		return nil, teambus.Unavailablef("inbox call cancelled: nothing acked: %w", ctx.Err())
	case len(msgs) == 0:
		if err := l.Release(ctx); err != nil {
			s.cfg.Logger.Warn("release empty lease", "team", id.Team, "member", id.Member, "err", err)
		}
	case !s.acks.hold(key, l, seqsOf(msgs)):
		_ = l.Release(ctx) // as above: the ack wait brings it back
		return nil, teambus.Unavailablef("inbox call cancelled: nothing acked")
	}
	return s.acks.presplice(key, sessionOf(req), inboxResult(out, true)), nil
}

// inboxOut is the inbox result of msgs read with limit.
func inboxOut(msgs []teambus.Message, limit int) InboxOut {
	out := InboxOut{Messages: make([]MessageOut, 0, len(msgs)), More: len(msgs) >= limit}
	for _, m := range msgs {
		out.Messages = append(out.Messages, messageOut(m, previewBody))
	}
	return out
}

func seqsOf(msgs []teambus.Message) []uint64 {
	seqs := make([]uint64, 0, len(msgs))
	for _, m := range msgs {
		seqs = append(seqs, m.Seq)
	}
	return seqs
}

// inboxResult is the result of an inbox call: the messages rendered as
// text and out as the structured content, encoded once with the response.
func inboxResult(out InboxOut, acked bool) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: inboxText(out, acked)}},
		StructuredContent: out,
	}
}

// inboxText renders messages as the CLI does, bodies indented.
func inboxText(out InboxOut, acked bool) string {
	if len(out.Messages) == 0 {
		return "no unacknowledged mail"
	}
	var w strings.Builder
	size := 200
	for _, m := range out.Messages {
		size += len(m.Body) + len(m.From) + len(m.To) + len(m.Type) + 80
	}
	w.Grow(size)
	fmt.Fprintf(&w, "%d message(s):\n", len(out.Messages))
	seqs := make([]string, len(out.Messages))
	for i, m := range out.Messages {
		writeMessage(&w, m)
		seqs[i] = strconv.FormatUint(m.Seq, 10)
	}
	if acked {
		fmt.Fprintf(&w, "(acknowledged once this result is delivered: %s)", strings.Join(seqs, " "))
	} else {
		fmt.Fprintf(&w, "(not acknowledged: when handled, call ack with seqs [%s])", strings.Join(seqs, ", "))
	}
	if out.More {
		w.WriteString("\n(more mail may be waiting: call inbox again)")
	}
	return w.String()
}

func writeMessage(w *strings.Builder, m MessageOut) {
	var num [20]byte
	w.WriteByte('#')
	w.Write(strconv.AppendUint(num[:0], m.Seq, 10))
	w.WriteByte(' ')
	w.WriteString(m.TS)
	w.WriteByte(' ')
	w.WriteString(cleanLine(m.From))
	w.WriteString(" -> ")
	w.WriteString(cleanLine(m.To))
	w.WriteString(" [")
	w.WriteString(cleanLine(m.Type))
	w.WriteString("]\n")
	writeBody(w, m.Body, "    ")
	w.WriteString("\n")
	if m.Truncated {
		fmt.Fprintf(w, "    (cut: read_message seq %d has the whole body)\n", m.Seq)
	}
	if m.Data != nil {
		if b, err := json.Marshal(m.Data); err == nil {
			fmt.Fprintf(w, "    data: %s\n", cleanLine(clip(string(b), 2000)))
		}
	}
}

func (s *Server) ack(ctx context.Context, _ *mcp.CallToolRequest, id Identity, in AckIn) (AckOut, string, error) {
	if slices.Contains(in.Seqs, 0) {
		return AckOut{}, "", teambus.Invalidf("invalid seq 0: give the seqs inbox returned")
	}
	res, err := s.team.ack(ctx, id.Actor(), in.Seqs)
	if err != nil {
		return AckOut{}, "", err
	}
	out := AckOut{Acked: nonNil(res.Acked), Already: nonNil(res.Already)}
	return out, fmt.Sprintf("acked %v; already acked %v", out.Acked, out.Already), nil
}

func (s *Server) readMessage(ctx context.Context, _ *mcp.CallToolRequest, id Identity, in SeqIn) (MessageOut, string, error) {
	if in.Seq == 0 {
		return MessageOut{}, "", teambus.Invalidf("invalid seq 0: give the seq inbox returned")
	}
	var found *teambus.Message
	err := s.team.replay(ctx, id.Actor(), mailbox.ReplayFilter{SinceSeq: in.Seq, UntilSeq: in.Seq, Limit: 1}, func(m teambus.Message) error {
		if m.Seq == in.Seq {
			found = &m
		}
		return nil
	})
	if err != nil {
		return MessageOut{}, "", err
	}
	if found == nil || (id.Member != teambus.Lead && found.To != id.Member && found.To != teambus.All && found.From != id.Member) {
		return MessageOut{}, "", teambus.NotFoundf("no message seq %d for %s in team %s", in.Seq, id.Member, id.Team)
	}
	out := messageOut(*found, 0)
	var w strings.Builder
	writeMessage(&w, out)
	return out, strings.TrimRight(w.String(), "\n"), nil
}

func taskText(verb string, t *teambus.Task) string {
	s := fmt.Sprintf("%s task %s: %s", verb, t.ID, t.Status)
	if t.AssignedTo != "" {
		s += " by " + t.AssignedTo
	}
	if t.Description != "" {
		s += "\n" + cleanBody(clip(t.Description, 2000), "    ")
	}
	return s
}

func (s *Server) taskNext(ctx context.Context, _ *mcp.CallToolRequest, id Identity, _ Empty) (TaskNextOut, string, error) {
	t, _, err := s.team.task(ctx, id.Actor(), teamapi.TaskRequest{Op: teamapi.TaskNext})
	if err != nil {
		if errors.Is(err, teambus.ErrState) || errors.Is(err, teamapi.ErrNoTask) {
			r := cleanLine(err.Error())
			return TaskNextOut{Reason: r}, "no task: " + r, nil
		}
		return TaskNextOut{}, "", err
	}
	return TaskNextOut{Task: taskOut(t), Reason: "claimed the best available task"}, taskText("claimed", t), nil
}

func (s *Server) taskClaim(ctx context.Context, _ *mcp.CallToolRequest, id Identity, in TaskIDIn) (TaskResult, string, error) {
	t, _, err := s.team.task(ctx, id.Actor(), teamapi.TaskRequest{Op: teamapi.TaskClaim, ID: in.ID})
	if err != nil {
		return TaskResult{}, "", err
	}
	return TaskResult{Task: *taskOut(t)}, taskText("claimed", t), nil
}

func (s *Server) taskRelease(ctx context.Context, _ *mcp.CallToolRequest, id Identity, in TaskIDIn) (TaskResult, string, error) {
	t, _, err := s.team.task(ctx, id.Actor(), teamapi.TaskRequest{Op: teamapi.TaskRelease, ID: in.ID})
	if err != nil {
		return TaskResult{}, "", err
	}
	return TaskResult{Task: *taskOut(t)}, taskText("released", t), nil
}

func (s *Server) taskComplete(ctx context.Context, _ *mcp.CallToolRequest, id Identity, in TaskCompleteIn) (TaskCompleteOut, string, error) {
	t, changed, err := s.team.task(ctx, id.Actor(), teamapi.TaskRequest{Op: teamapi.TaskComplete, ID: in.ID, Commit: in.Commit})
	if err != nil {
		return TaskCompleteOut{}, "", err
	}
	out := TaskCompleteOut{Task: *taskOut(t), Unblocked: []string{}}
	verb := "already completed"
	if changed {
		verb = "completed"
		if v, err := s.team.show(ctx, id.Actor()); err == nil {
			for _, dt := range v.Tasks {
				if dt.Status == teambus.TaskAvailable && slices.Contains(dt.Dependencies, t.ID) {
					out.Unblocked = append(out.Unblocked, dt.ID)
				}
			}
		}
	}
	if in.Summary != "" && id.Member != teambus.Lead {
		// The summary goes to the lead as a report; its id makes a retry
		// store nothing new.
		msgID := fmt.Sprintf("complete-%s-e%d", t.ID, t.Epoch)
		if _, err := s.team.send(ctx, id.Actor(), teamapi.SendRequest{To: teambus.Lead, Type: teambus.MsgReport, ID: msgID, Body: fmt.Sprintf("task %s complete: %s", t.ID, in.Summary)}); err != nil {
			s.cfg.Logger.Warn("send completion summary", "team", id.Team, "task", t.ID, "err", err)
		}
	}
	text := taskText(verb, t)
	if len(out.Unblocked) > 0 {
		text += "\nnow available: " + strings.Join(out.Unblocked, ", ")
	}
	return out, text, nil
}

func (s *Server) taskFail(ctx context.Context, _ *mcp.CallToolRequest, id Identity, in TaskFailIn) (TaskResult, string, error) {
	t, _, err := s.team.task(ctx, id.Actor(), teamapi.TaskRequest{Op: teamapi.TaskFail, ID: in.ID, Reason: in.Reason})
	if err != nil {
		return TaskResult{}, "", err
	}
	return TaskResult{Task: *taskOut(t)}, taskText("failed", t), nil
}

func (s *Server) taskBlock(ctx context.Context, _ *mcp.CallToolRequest, id Identity, in TaskBlockIn) (TaskResult, string, error) {
	t, _, err := s.team.task(ctx, id.Actor(), teamapi.TaskRequest{Op: teamapi.TaskBlock, ID: in.ID, On: in.On, Reason: in.Reason})
	if err != nil {
		return TaskResult{}, "", err
	}
	return TaskResult{Task: *taskOut(t)}, taskText("blocked", t), nil
}

func (s *Server) taskList(ctx context.Context, _ *mcp.CallToolRequest, id Identity, in TaskListIn) (TaskListOut, string, error) {
	if in.Status != "" && !slices.Contains(teambus.TaskStatuses, teambus.TaskStatus(in.Status)) {
		return TaskListOut{}, "", teambus.Invalidf("invalid status %q: one of pending, available, in_progress, blocked, complete, failed, paused, skipped", cleanLine(clip(in.Status, 40)))
	}
	v, err := s.team.show(ctx, id.Actor())
	if err != nil {
		return TaskListOut{}, "", err
	}
	out := TaskListOut{Tasks: []TaskOut{}}
	var w strings.Builder
	for _, t := range v.Tasks {
		if in.Status == "" || string(t.Status) == in.Status {
			out.Tasks = append(out.Tasks, *taskOut(t))
			fmt.Fprintf(&w, "%s %s %s %s\n", t.ID, t.Status, orDash(t.AssignedTo), cleanLine(clip(t.Description, 80)))
		}
	}
	if len(out.Tasks) == 0 {
		return out, "no tasks", nil
	}
	return out, strings.TrimRight(w.String(), "\n"), nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (s *Server) taskShow(ctx context.Context, _ *mcp.CallToolRequest, id Identity, in TaskIDIn) (TaskResult, string, error) {
	if err := teambus.ValidateID("task", in.ID); err != nil {
		return TaskResult{}, "", err
	}
	t, err := s.team.taskRecord(ctx, id.Actor(), in.ID)
	if err != nil {
		return TaskResult{}, "", err
	}
	text := taskText("", t)[1:]
	if c := t.Checkpoint; c != nil {
		text += fmt.Sprintf("\ncheckpoint %d by %s: %s", c.Seq, c.Member, cleanLine(clip(c.LastAction, 500)))
	}
	return TaskResult{Task: *taskOut(t)}, text, nil
}

func (s *Server) checkpoint(ctx context.Context, _ *mcp.CallToolRequest, id Identity, in CheckpointIn) (CheckpointResult, string, error) {
	req := teamapi.CheckpointRequest{Done: in.Done, Remaining: in.Remaining, LastAction: in.LastAction, Files: in.Files, Task: in.Task}
	if in.Data != nil {
		b, err := json.Marshal(in.Data)
		if err != nil {
			return CheckpointResult{}, "", teambus.Invalidf("invalid data: %w", err)
		}
		req.Data = b
	}
	t, err := s.team.checkpoint(ctx, id.Actor(), req)
	if err != nil {
		return CheckpointResult{}, "", err
	}
	out := CheckpointResult{Task: t.ID}
	if t.Checkpoint != nil {
		out.Seq = t.Checkpoint.Seq
	}
	return out, fmt.Sprintf("checkpoint %d of task %s recorded", out.Seq, t.ID), nil
}

// condition is a member's liveness in one word.
func condition(m team.MemberView) string {
	switch m.Status {
	case teambus.MemberZombie, teambus.MemberCrashed, teambus.MemberPaused, teambus.MemberShutdown:
		return string(m.Status)
	}
	if m.Online {
		return "online"
	}
	return "offline"
}

func (s *Server) teamStatus(ctx context.Context, _ *mcp.CallToolRequest, id Identity, _ Empty) (TeamStatusOut, string, error) {
	v, err := s.team.show(ctx, id.Actor())
	if err != nil {
		return TeamStatusOut{}, "", err
	}
	out := TeamStatusOut{Team: v.Team.ID, Status: string(v.Team.Status), Members: []MemberStatusOut{}, Tasks: map[string]int{}}
	if v.Lead != nil {
		out.LeadOnline = v.Lead.Online
	}
	for _, m := range v.Members {
		ms := MemberStatusOut{ID: m.ID, Role: m.Role, Status: string(m.Status), Epoch: m.Epoch,
			LastHeartbeat: timePtrString(m.LastHeartbeat), LastActivity: timePtrString(m.LastActivity), Condition: condition(m)}
		if m.Task != nil {
			ms.Task = *m.Task
		}
		out.Members = append(out.Members, ms)
	}
	total, done := 0, 0
	for st, n := range v.Counts {
		out.Tasks[st] = n
		total += n
		if st == string(teambus.TaskComplete) || st == string(teambus.TaskSkipped) {
			done += n
		}
	}
	if total > 0 {
		out.Progress = done * 100 / total
	}
	return out, teamStatusText(out, total), nil
}

func (s *Server) brief(ctx context.Context, _ *mcp.CallToolRequest, id Identity, in BriefIn) (BriefOut, string, error) {
	member := in.Member
	if member == "" {
		if !id.Bound() {
			return BriefOut{}, "", errNotBound
		}
		if id.Member == teambus.Lead {
			return BriefOut{}, "", teambus.Invalidf("the lead has no brief: give member, or call team_status")
		}
		member = id.Member
	}
	b, err := s.team.brief(ctx, id.Actor(), member)
	if err != nil {
		return BriefOut{}, "", err
	}
	return BriefOut{Text: b.Text}, b.Text, nil
}

func (s *Server) replay(ctx context.Context, _ *mcp.CallToolRequest, id Identity, in ReplayIn) (MessagesOut, string, error) {
	if in.Limit < 0 {
		return MessagesOut{}, "", teambus.Invalidf("invalid limit %d: must not be negative", in.Limit)
	}
	f := mailbox.ReplayFilter{From: in.From, To: in.To, Type: teambus.MessageType(in.Type), Limit: in.Limit}
	if f.Limit == 0 || f.Limit > replayMax {
		f.Limit = replayMax
	}
	if in.Since != "" {
		if n, err := strconv.ParseUint(in.Since, 10, 64); err == nil {
			f.SinceSeq = n
		} else if t, err := time.Parse(time.RFC3339, in.Since); err == nil {
			f.SinceTime = t
		} else {
			return MessagesOut{}, "", teambus.Invalidf("invalid since %q: a seq or an RFC 3339 time", cleanLine(clip(in.Since, 40)))
		}
	}
	out := MessagesOut{Messages: []MessageOut{}}
	var w strings.Builder
	err := s.team.replay(ctx, id.Actor(), f, func(m teambus.Message) error {
		mo := messageOut(m, previewBody)
		out.Messages = append(out.Messages, mo)
		writeMessage(&w, mo)
		return nil
	})
	if err != nil {
		return MessagesOut{}, "", err
	}
	if len(out.Messages) == 0 {
		return out, "no messages", nil
	}
	return out, strings.TrimRight(w.String(), "\n"), nil
}

// leadCheck refuses a caller that is not the team's current lead session.
func (s *Server) leadCheck(ctx context.Context, id Identity) error {
	if id.Member != teambus.Lead {
		return teambus.Invalidf("%s is not the lead: only member lead may do this", id.Member)
	}
	t, err := s.team.teamRecord(ctx, id.Actor())
	if err != nil {
		return err
	}
	if t.LeadSession != "" && t.LeadSession != id.Session {
		return teambus.Fencedf("session %q is not the lead session of team %s (lead epoch %d)", clip(id.Session, 80), t.ID, t.LeadEpoch)
	}
	return nil
}

func (s *Server) taskAdd(ctx context.Context, _ *mcp.CallToolRequest, id Identity, in TaskAddIn) (TaskResult, string, error) {
	if err := s.leadCheck(ctx, id); err != nil {
		return TaskResult{}, "", err
	}
	t, err := s.team.addTask(ctx, id.Actor(), team.TaskSpec{ID: in.ID, Description: in.Description, Deps: in.Deps, Priority: in.Priority, Quantum: in.Quantum})
	if err != nil {
		return TaskResult{}, "", err
	}
	return TaskResult{Task: *taskOut(t)}, taskText("added", t), nil
}

func (s *Server) taskReassign(ctx context.Context, _ *mcp.CallToolRequest, id Identity, in TaskReassignIn) (TaskResult, string, error) {
	if err := s.leadCheck(ctx, id); err != nil {
		return TaskResult{}, "", err
	}
	t, _, err := s.team.task(ctx, id.Actor(), teamapi.TaskRequest{Op: teamapi.TaskReassign, ID: in.ID, To: in.To})
	if err != nil {
		return TaskResult{}, "", err
	}
	return TaskResult{Task: *taskOut(t)}, taskText("reassigned", t), nil
}

func (s *Server) teamResume(ctx context.Context, _ *mcp.CallToolRequest, id Identity, in TeamResumeIn) (ReportOut, string, error) {
	if id.Member != teambus.Lead {
		return ReportOut{}, "", teambus.Invalidf("%s is not the lead: only member lead may resume the team", id.Member)
	}
	if id.Session == "" {
		return ReportOut{}, "", teambus.Invalidf("team_resume needs this session's id: set TEAMBUS_SESSION for the MCP server")
	}
	r, err := s.team.resume(ctx, id.Actor(), in.Force)
	if err != nil {
		return ReportOut{}, "", err
	}
	out := reportOut(r)
	return out, reportText(out), nil
}

func (s *Server) teamProbe(ctx context.Context, _ *mcp.CallToolRequest, id Identity, _ Empty) (ReportOut, string, error) {
	if id.Member != teambus.Lead {
		return ReportOut{}, "", teambus.Invalidf("%s is not the lead: only member lead may probe the team", id.Member)
	}
	r, err := s.team.probe(ctx, id.Actor())
	if err != nil {
		return ReportOut{}, "", err
	}
	out := reportOut(r)
	return out, reportText(out), nil
}
