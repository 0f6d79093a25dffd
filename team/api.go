package team

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/teamapi"
)

// MaxWait caps the wait of an inbox read.
const MaxWait = 10 * time.Minute

// MaxInbox caps the messages of one inbox read.
const MaxInbox = 10000

// API is the member API on the team state: the teamapi.API that the team
// service answers on the bus, with the same request and reply types.
// Every request acts as its Actor, which the caller has decided.
type API struct{ s *Service }

var _ teamapi.API = API{}

// API returns the member API of s.
func (s *Service) API() API { return API{s} }

// actor validates the actor of a request.
func actor(a teamapi.Actor) (Actor, error) { return a, a.Validate() }

// Send implements teamapi.API.
func (x API) Send(ctx context.Context, r teamapi.SendRequest) (teamapi.SendResult, error) {
	a, err := actor(r.Actor)
	if err != nil {
		return teamapi.SendResult{}, err
	}
	if r.Type, r.To, err = sendRules(a, r.Type, r.To); err != nil {
		return teamapi.SendResult{}, err
	}
	return x.s.Send(ctx, r)
}

// sendRules applies the rules of who sends what to a message of type typ
// (default info) to to (default the lead), and returns both.
func sendRules(a Actor, typ teambus.MessageType, to string) (teambus.MessageType, string, error) {
	t := teambus.MsgInfo
	if typ != "" {
		var err error
		if t, err = teambus.ParseMessageType(string(typ)); err != nil {
			return "", "", err
		}
	}
	if to == "" {
		to = teambus.Lead
	}
	switch t {
	case teambus.MsgShutdownRequest:
		if !a.IsLead() {
			return "", "", teambus.Invalidf("only the lead may send %s: %s asked to shut %s down", t, a.Member, to)
		}
	case teambus.MsgShutdownResponse:
		if to != teambus.Lead {
			return "", "", teambus.Invalidf("%s goes to the lead, not to %s", t, to)
		}
	}
	return t, to, nil
}

// SendBatch implements teamapi.API.
func (x API) SendBatch(ctx context.Context, r teamapi.SendBatchRequest) (teamapi.SendBatchReply, error) {
	a, err := actor(r.Actor)
	if err != nil {
		return teamapi.SendBatchReply{}, err
	}
	if len(r.Messages) > MaxSendBatch {
		return teamapi.SendBatchReply{}, teambus.Invalidf("%d messages in one batch, at most %d: send them in several", len(r.Messages), MaxSendBatch)
	}
	specs := slices.Clone(r.Messages)
	for i, m := range specs {
		typ, to, err := sendRules(a, m.Type, m.To)
		if err != nil {
			if m.Line > 0 {
				return teamapi.SendBatchReply{}, fmt.Errorf("line %d: %w", m.Line, err)
			}
			return teamapi.SendBatchReply{}, fmt.Errorf("message %d: %w", i+1, err)
		}
		specs[i].Type, specs[i].To = typ, to
	}
	if r.Check {
		return teamapi.SendBatchReply{Results: []mailbox.SendResult{}}, x.s.CheckBatch(ctx, a, specs)
	}
	res, err := x.s.SendBatch(ctx, a, specs)
	return teamapi.SendBatchReply{Results: res}, err
}

// Inbox implements teamapi.API.
func (x API) Inbox(ctx context.Context, r teamapi.InboxRequest) (teamapi.InboxReply, error) {
	out := teamapi.InboxReply{Messages: []teamapi.Leased{}}
	a, err := actor(r.Actor)
	if err != nil {
		return out, err
	}
	if wait := r.Wait(); wait < 0 || wait > MaxWait {
		return out, teambus.Invalidf("invalid inbox wait %s: 0 to %s", wait, MaxWait)
	}
	if r.Max < 0 || r.Max > MaxInbox {
		return out, teambus.Invalidf("invalid inbox limit %d: 1 to %d", r.Max, MaxInbox)
	}
	switch r.Mode {
	case "", teamapi.InboxPeek, teamapi.InboxAck:
		msgs, err := x.s.Inbox(ctx, a, mailbox.InboxOptions{Max: r.Max, Wait: r.Wait(), Ack: r.Mode == teamapi.InboxAck, MaxBytes: x.s.pageBytes()})
		if err != nil {
			return out, err
		}
		for _, m := range msgs {
			out.Messages = append(out.Messages, teamapi.Leased{Message: m})
		}
	case teamapi.InboxLease:
		if err := x.s.checkActor(ctx, a); err != nil {
			return out, err
		}
		l, err := x.s.Mailbox(a.Team).Lease(ctx, a.Member, mailbox.LeaseOptions{Max: r.Max, Wait: r.Wait(), Self: a.Member, MaxBytes: x.s.pageBytes()})
		if err != nil {
			return out, err
		}
		// No lease is kept here: the member acks or releases by token.
		for _, m := range l.Messages {
			out.Messages = append(out.Messages, teamapi.Leased{Message: m, Token: l.Token(m.Seq)})
		}
	default:
		return out, teambus.Invalidf("invalid inbox mode %q: %s, %s or %s", r.Mode, teamapi.InboxPeek, teamapi.InboxLease, teamapi.InboxAck)
	}
	return out, nil
}

// checkActor checks the actor's incarnation, as every write does: an
// unknown member is not found, an old session is fenced.
func (s *Service) checkActor(ctx context.Context, a Actor) error {
	if a.IsLead() {
		_, _, err := s.incarnation(ctx, a)
		return err
	}
	m, _, err := s.store.Member(ctx, a.Team, a.Member)
	if err != nil {
		return err
	}
	return m.Fenced(a.Session)
}

// incarnation returns the actor's team and its member record (nil for
// the lead) after checking the actor's session: an unknown member is not
// found, an old session is fenced.
func (s *Service) incarnation(ctx context.Context, a Actor) (*teambus.Team, *teambus.Member, error) {
	t, _, err := s.store.Team(ctx, a.Team)
	if err != nil {
		return nil, nil, err
	}
	if a.IsLead() {
		if t.LeadSession != "" && a.Session != t.LeadSession {
			return nil, nil, &StaleLeadError{Team: t.ID, Session: a.Session, Epoch: t.LeadEpoch}
		}
		return t, nil, nil
	}
	m, _, err := s.store.Member(ctx, a.Team, a.Member)
	if err != nil {
		return nil, nil, err
	}
	return t, m, m.Fenced(a.Session)
}

func leaseTokens(ts []teamapi.Token) []mailbox.LeaseToken {
	out := make([]mailbox.LeaseToken, 0, len(ts))
	for _, t := range ts {
		out = append(out, mailbox.LeaseToken{Seq: t.Seq, Reply: t.Token})
	}
	return out
}

// Ack implements teamapi.API.
func (x API) Ack(ctx context.Context, r teamapi.AckRequest) (teamapi.AckReply, error) {
	a, err := actor(r.Actor)
	if err != nil {
		return teamapi.AckReply{}, err
	}
	if len(r.Tokens) > 0 && len(r.Seqs) > 0 {
		return teamapi.AckReply{}, teambus.Invalidf("ack by sequences or by tokens, not both")
	}
	var res mailbox.AckResult
	if len(r.Tokens) > 0 {
		if err := x.s.checkActor(ctx, a); err != nil {
			return teamapi.AckReply{}, err
		}
		res, err = x.s.Mailbox(a.Team).AckLeased(ctx, a.Member, leaseTokens(r.Tokens))
	} else {
		res, err = x.s.Ack(ctx, a, r.Seqs)
	}
	if err != nil {
		return teamapi.AckReply{}, err
	}
	return teamapi.AckReply{Acked: nonNilSeqs(res.Acked), Already: nonNilSeqs(res.Already)}, nil
}

func nonNilSeqs(s []uint64) []uint64 {
	if s == nil {
		return []uint64{}
	}
	return s
}

// Release implements teamapi.API.
func (x API) Release(ctx context.Context, r teamapi.ReleaseRequest) (teamapi.ReleaseReply, error) {
	a, err := actor(r.Actor)
	if err == nil {
		err = x.s.checkActor(ctx, a)
	}
	if err != nil {
		return teamapi.ReleaseReply{}, err
	}
	n, err := x.s.Mailbox(a.Team).ReleaseLeased(ctx, a.Member, leaseTokens(r.Tokens))
	return teamapi.ReleaseReply{Released: n}, err
}

// Task implements teamapi.API.
func (x API) Task(ctx context.Context, r teamapi.TaskRequest) (teamapi.TaskReply, error) {
	a, err := actor(r.Actor)
	if err != nil {
		return teamapi.TaskReply{}, err
	}
	if r.Op != teamapi.TaskNext {
		if err := teambus.ValidateID("task", r.ID); err != nil {
			return teamapi.TaskReply{}, err
		}
	}
	var (
		t       *teambus.Task
		changed = true
	)
	switch r.Op {
	case teamapi.TaskClaim:
		t, err = x.s.Claim(ctx, a, r.ID)
	case teamapi.TaskNext:
		t, err = x.s.Next(ctx, a)
	case teamapi.TaskComplete:
		t, changed, err = x.s.Complete(ctx, a, r.ID, r.Commit)
	case teamapi.TaskFail:
		t, err = x.s.Fail(ctx, a, r.ID, r.Reason)
	case teamapi.TaskBlock:
		t, err = x.s.Block(ctx, a, r.ID, r.On, r.Reason)
	case teamapi.TaskRelease:
		t, err = x.s.Release(ctx, a, r.ID)
	case teamapi.TaskReassign:
		t, err = x.s.Reassign(ctx, a, r.ID, r.To)
	case teamapi.TaskReopen:
		t, err = x.s.Reopen(ctx, a, r.ID)
	case teamapi.TaskAdd:
		if !a.IsLead() && !a.Operator {
			return teamapi.TaskReply{}, teamapi.Refusedf("only the lead may add tasks, not %s", a.Member)
		}
		t, err = x.s.AddTask(ctx, a.Team, TaskSpec{ID: r.ID, Description: r.Description, Deps: r.Deps, Priority: r.Priority, Quantum: r.Quantum})
	default:
		return teamapi.TaskReply{}, teambus.Invalidf("invalid task operation %q", r.Op)
	}
	if err != nil {
		// Complete reports a failed promotion with the task it completed.
		if t != nil && r.Op == teamapi.TaskComplete {
			x.s.cfg.Logger.Warn("promote after complete", "team", a.Team, "task", t.ID, "err", err)
			return teamapi.TaskReply{Task: t, Changed: changed}, nil
		}
		return teamapi.TaskReply{}, err
	}
	return teamapi.TaskReply{Task: t, Changed: changed}, nil
}

// Checkpoint implements teamapi.API.
func (x API) Checkpoint(ctx context.Context, r teamapi.CheckpointRequest) (teamapi.TaskReply, error) {
	a, err := actor(r.Actor)
	if err != nil {
		return teamapi.TaskReply{}, err
	}
	r.Actor = a
	t, err := x.s.Checkpoint(ctx, r)
	if err != nil {
		return teamapi.TaskReply{}, err
	}
	return teamapi.TaskReply{Task: t, Changed: true}, nil
}

// Heartbeat implements teamapi.API: the beat of the actor's incarnation,
// fenced as every write is.
func (x API) Heartbeat(ctx context.Context, r teamapi.HeartbeatRequest) (teamapi.HeartbeatReply, error) {
	a, err := actor(r.Actor)
	if err != nil {
		return teamapi.HeartbeatReply{}, err
	}
	t, m, err := x.s.incarnation(ctx, a)
	if err != nil {
		return teamapi.HeartbeatReply{}, err
	}
	hb := &kv.Heartbeat{Member: a.Member, Session: a.Session, Status: r.Status, Task: r.Task, ContextPct: r.ContextPct, PID: r.PID, Epoch: t.LeadEpoch}
	key, ttl := kv.LeadKey, t.Policy.LeadTimeout
	if m != nil {
		hb.Epoch, key, ttl = m.Epoch, kv.MemberKey(a.Member), t.Policy.MemberTimeout
	}
	rev, err := x.s.store.Beat(ctx, a.Team, key, hb, ttl, r.Rev)
	return teamapi.HeartbeatReply{Rev: rev}, err
}

// Join implements teamapi.API.
func (x API) Join(ctx context.Context, r teamapi.JoinRequest) (*teambus.Member, error) {
	a, err := actor(r.Actor)
	if err != nil {
		return nil, err
	}
	if a.IsLead() {
		return nil, teambus.Invalidf("the lead attaches with `teambus lead` or `teambus team resume`, not join")
	}
	return x.s.Join(ctx, a.Team, a.Member, a.Session)
}

// Brief implements teamapi.API: a *Brief. A member reads its own brief;
// the lead and the operator read anyone's.
func (x API) Brief(ctx context.Context, r teamapi.BriefRequest) (any, error) {
	a, err := actor(r.Actor)
	if err != nil {
		return nil, err
	}
	of := r.Of
	if of == "" {
		of = a.Member
	}
	if of != a.Member && !a.IsLead() && !a.Operator {
		return nil, teamapi.Refusedf("%s may read only its own brief, not the brief of %s", a.Member, of)
	}
	if r.Mail < 0 || r.Mail > teamapi.ReplayMax {
		return nil, teambus.Invalidf("invalid mail count %d: 0 to %d", r.Mail, teamapi.ReplayMax)
	}
	b, err := x.s.Brief(ctx, a.Team, of, r.Mail)
	if err != nil {
		return nil, err
	}
	return fitBrief(b, x.s.cfg.MaxReply), nil
}

// fitBrief returns b when its JSON fits max bytes; otherwise the
// checkpoints of its dependencies (which the prompt text does not show)
// come as summaries (ClippedCheckpoint), largest first, until it does.
// What still does not fit is the service's to refuse (too_big). The
// tasks of b are not changed: clipped ones are copies.
func fitBrief(b *Brief, max int) *Brief {
	raw, err := json.Marshal(b)
	if err != nil || len(raw) <= max {
		return b
	}
	size := len(raw)
	out := *b
	out.Deps = slices.Clone(b.Deps)
	order := make([]int, 0, len(out.Deps))
	for i, d := range out.Deps {
		if d.Checkpoint != nil {
			order = append(order, i)
		}
	}
	cpLen := func(cp *teambus.Checkpoint) int {
		cb, _ := json.Marshal(cp) // a checkpoint always encodes: it came from JSON
		return len(cb)
	}
	slices.SortFunc(order, func(i, j int) int { return cpLen(out.Deps[j].Checkpoint) - cpLen(out.Deps[i].Checkpoint) })
	for _, i := range order {
		if size <= max {
			break
		}
		d := *out.Deps[i]
		before := cpLen(d.Checkpoint)
		d.Checkpoint = ClippedCheckpoint(d.Checkpoint, d.ID)
		size -= before - cpLen(d.Checkpoint)
		out.Deps[i] = &d
	}
	return &out
}

// errPageFull ends a replay page.
var errPageFull = errors.New("page full")

// Replay implements teamapi.API: one page of the actor's own mail; for
// the lead, of the team's whole mailbox.
func (x API) Replay(ctx context.Context, r teamapi.ReplayRequest) (teamapi.ReplayReply, error) {
	out := teamapi.ReplayReply{Messages: []teambus.Message{}}
	a, err := actor(r.Actor)
	if err == nil {
		err = x.s.checkActor(ctx, a)
	}
	if err != nil {
		return out, err
	}
	limit := r.Limit
	if limit <= 0 || limit > teamapi.ReplayMax {
		limit = teamapi.ReplayMax
	}
	// A page also stops before its messages' JSON would pass the reply
	// budget; the first message of a page always goes in.
	budget, used := x.s.pageBytes(), 0
	err = x.s.Mailbox(a.Team).Replay(ctx, mailbox.ReplayFilter{SinceSeq: r.SinceSeq}, func(m teambus.Message) error {
		if !a.IsLead() && m.To != a.Member && m.From != a.Member && m.To != teambus.All {
			return nil
		}
		n := messageJSONLen(m) + 1
		if len(out.Messages) == limit || len(out.Messages) > 0 && used+n > budget {
			out.Next = m.Seq
			return errPageFull
		}
		used += n
		out.Messages = append(out.Messages, m)
		return nil
	})
	if err != nil && !errors.Is(err, errPageFull) {
		return out, err
	}
	return out, nil
}

// messageJSONLen is the size of m in a reply.
func messageJSONLen(m teambus.Message) int {
	b, err := json.Marshal(m)
	if err != nil {
		return len(m.Body) + len(m.Data) + 512
	}
	return len(b)
}

// Show implements teamapi.API: a *View of the actor's team, which every
// member of the team may read.
func (x API) Show(ctx context.Context, r teamapi.ShowRequest) (any, error) {
	a, err := actor(r.Actor)
	if err != nil {
		return nil, err
	}
	if !a.IsLead() {
		if _, _, err := x.s.store.Member(ctx, a.Team, a.Member); err != nil {
			return nil, err
		}
	}
	v, err := x.s.Show(ctx, a.Team)
	if err != nil {
		return nil, err
	}
	return fitView(v, x.s.cfg.MaxReply)
}

// fitView returns v when its JSON fits max bytes. Otherwise the largest
// checkpoints are replaced by a summary (ClippedCheckpoint) until it
// does; a view that does not fit even then is refused
// (teamapi.ErrTooBig) with what makes it big. The tasks of v are not
// changed: clipped ones are copies.
func fitView(v *View, max int) (*View, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode view of team %s: %w", v.Team.ID, err)
	}
	size := len(b)
	if size <= max {
		return v, nil
	}
	type big struct{ i, n int }
	var cps []big
	for i, t := range v.Tasks {
		if t.Checkpoint != nil {
			cb, _ := json.Marshal(t.Checkpoint) // a checkpoint always encodes: it came from JSON
			cps = append(cps, big{i, len(cb)})
		}
	}
	slices.SortFunc(cps, func(a, b big) int { return b.n - a.n })
	out := *v
	out.Tasks = slices.Clone(v.Tasks)
	clipped := 0
	for _, c := range cps {
		if size <= max {
			break
		}
		t := *out.Tasks[c.i]
		t.Checkpoint = ClippedCheckpoint(t.Checkpoint, t.ID)
		cb, _ := json.Marshal(t.Checkpoint) // as above
		size -= c.n - len(cb)
		out.Tasks[c.i] = &t
		clipped++
	}
	if size <= max {
		return &out, nil
	}
	descs := 0
	for _, t := range v.Tasks {
		descs += len(t.Description)
	}
	return nil, teamapi.TooBigf("the view of team %s is %d bytes with %d checkpoints clipped, more than an answer carries (%d): %d members, %d tasks with %d bytes of descriptions; the operator reads it whole with the node's token",
		v.Team.ID, size, clipped, max, len(v.Members), len(v.Tasks), descs)
}

// ClippedCheckpoint is the summary of cp that a team view or a brief too
// big for an answer shows: who recorded it and when, the last action cut to 200
// bytes, and in the data how big it was and where to read it whole (the
// operator's task show; a brief never clips the member's own task).
func ClippedCheckpoint(cp *teambus.Checkpoint, task string) *teambus.Checkpoint {
	c := *cp
	full, _ := json.Marshal(cp) // a checkpoint always encodes
	c.LastAction = clipText(cp.LastAction, 200)
	c.TasksCompleted, c.TasksRemaining, c.Files = []string{}, []string{}, []string{}
	c.Data, _ = json.Marshal(map[string]any{"clipped": fmt.Sprintf("checkpoint of %d bytes (%d done, %d remaining, %d files) left out so the answer fits the bus: teambus task show %s with the node's token prints it whole",
		len(full), len(cp.TasksCompleted), len(cp.TasksRemaining), len(cp.Files), task), "task": task})
	return &c
}
