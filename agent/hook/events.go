package hook

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/agent/binding"
	"github.com/teambus/teambus/proc"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// userPromptSubmit marks the turn start, wakes the waiter out of its wait
// (a prompt started a turn: it exits 0) and delivers mail (§12.3.7).
func (h *hook) userPromptSubmit(ctx context.Context) int {
	now := h.cfg.Now().UTC()
	pid := h.p.PromptID
	h.later(func(b *binding.Binding) bool {
		b.TurnStart = &now
		if b.PromptID != pid {
			b.PromptID, b.StopContinues = pid, 0
		}
		return true
	})
	if w := h.b.WaiterPID; w > 0 && isWaiter(w, h.b.WaiterStart) {
		_ = syscall.Kill(w, syscall.SIGUSR1) // a wake-up nudge: the waiter also polls
	}
	return h.deliverEvent(ctx, "UserPromptSubmit", true)
}

// isWaiter reports whether pid is still the waiter recorded with its start
// time (a pid may have been reused).
func isWaiter(pid int, start uint64) bool {
	st, err := binding.StartTime(pid)
	return err == nil && st == start
}

// stop is Stop (§12.3.10): late mail continues the turn; with
// --autonomous a held in-progress task without a checkpoint this turn
// continues it (at most twice per prompt); otherwise nothing. Notices are
// left for the next hook: alone they must not continue a turn.
func (h *hook) stop(ctx context.Context) int {
	if err := h.connect(ctx); err != nil {
		return h.fail(err)
	}
	h.touch(ctx)
	var d *drained
	if h.drainLock(ctx) {
		var err error
		if d, err = h.drain(ctx, h.cfg.MaxContext); err != nil {
			h.rec.Error = Clean(clipChars(err.Error(), 300))
		}
	}
	if d != nil {
		return h.finish(ctx, "Stop", "", d)
	}
	if !h.cfg.Autonomous || h.b.Lead() || h.p.StopHookActive {
		h.flush(ctx)
		return 0
	}
	if h.b.PromptID == h.p.PromptID && h.b.StopContinues >= 2 {
		h.flush(ctx)
		return 0
	}
	st, err := h.api.Status(ctx, teamapi.StatusRequest{Actor: h.actor(), Held: true})
	if err != nil {
		h.flush(ctx)
		return h.fail(err)
	}
	var held *teambus.Task
	for _, t := range st.Held {
		if t.Status == teambus.TaskInProgress {
			held = t
			break
		}
	}
	if held == nil {
		h.flush(ctx)
		return 0
	}
	cp := held.Checkpoint
	if cp != nil && h.b.TurnStart != nil && cp.At.After(*h.b.TurnStart) {
		h.flush(ctx)
		return 0
	}
	last := "none"
	if cp != nil {
		last = fmt.Sprintf("#%d at %s", cp.Seq, cp.At.UTC().Format(time.RFC3339))
	}
	pid := h.p.PromptID
	h.later(func(b *binding.Binding) bool {
		if b.PromptID != pid {
			b.PromptID, b.StopContinues = pid, 0
		}
		b.StopContinues++
		return true
	})
	h.rec.Outcome = "autonomous-continue"
	text := fmt.Sprintf("You hold task %s (in_progress, last checkpoint %s). Continue it, record progress (`teambus checkpoint …`), complete it (`teambus task complete %s`) or block it (`teambus task block %s --reason …`).\n", held.ID, last, held.ID, held.ID)
	return h.finish(ctx, "Stop", text, nil)
}

// heldTask returns the task the member holds, or nil.
func (h *hook) heldTask(ctx context.Context) *teambus.Task {
	st, err := h.api.Status(ctx, teamapi.StatusRequest{Actor: h.actor(), Held: true})
	if err != nil || len(st.Held) == 0 {
		return nil
	}
	return st.Held[0]
}

// preCompact saves a checkpoint of the held task (§12.3.12). No output;
// it never blocks compaction.
func (h *hook) preCompact(ctx context.Context) int {
	if h.b.Lead() {
		return 0
	}
	return h.checkpointHeld(ctx, func(t *teambus.Task, spec *teamapi.CheckpointRequest) {
		trigger := Clean(clipChars(h.p.Trigger, 40))
		spec.LastAction = fmt.Sprintf("context compaction (%s)", trigger)
		spec.Files = proc.GitChanged(ctx, h.p.Cwd, 500*time.Millisecond)
		spec.Data = mergeData(t.Checkpoint, map[string]any{"compaction": map[string]any{"trigger": trigger, "at": h.cfg.Now().UTC()}})
	})
}

// postCompact keeps the first 4,000 characters of the compaction summary
// in the held task's checkpoint data (§12.3.13).
func (h *hook) postCompact(ctx context.Context) int {
	if h.b.Lead() || h.p.CompactSummary == "" {
		return 0
	}
	return h.checkpointHeld(ctx, func(t *teambus.Task, spec *teamapi.CheckpointRequest) {
		spec.Data = mergeData(t.Checkpoint, map[string]any{"compact_summary": clipChars(h.p.CompactSummary, 4000)})
	})
}

// checkpointHeld saves a checkpoint of the member's held task: the
// previous checkpoint carried over, then changed by fill.
func (h *hook) checkpointHeld(ctx context.Context, fill func(t *teambus.Task, spec *teamapi.CheckpointRequest)) int {
	if err := h.connect(ctx); err != nil {
		return h.fail(err)
	}
	t := h.heldTask(ctx)
	if t == nil {
		h.rec.Outcome = "no-task"
		return 0
	}
	spec := carry(t.Checkpoint)
	if t.Checkpoint != nil {
		// fill merges into the carried checkpoint's data: the clipped one.
		cp := *t.Checkpoint
		cp.Clip()
		t.Checkpoint = &cp
	}
	fill(t, &spec)
	fit(&spec)
	spec.Task, spec.Actor = t.ID, h.actor()
	if _, err := h.api.Checkpoint(ctx, spec); err != nil {
		return h.fail(err)
	}
	h.rec.Outcome = "checkpoint"
	return 0
}

// carry starts a checkpoint spec from the previous checkpoint, so a hook's
// checkpoint keeps what the agent reported. A previous checkpoint over the
// caps (recorded before them) is clipped to fit, and its data says what
// was cut: a hook never fails for an old checkpoint.
func carry(cp *teambus.Checkpoint) teamapi.CheckpointRequest {
	if cp == nil {
		return teamapi.CheckpointRequest{}
	}
	c := *cp
	c.Clip()
	return teamapi.CheckpointRequest{Done: c.TasksCompleted, Remaining: c.TasksRemaining, LastAction: c.LastAction, Files: c.Files, Data: c.Data}
}

// fit clips a hook's checkpoint spec to the caps once it is filled in (the
// data it merged, the files it found), saying what it cut in the data.
func fit(spec *teamapi.CheckpointRequest) {
	c := teambus.Checkpoint{TasksCompleted: spec.Done, TasksRemaining: spec.Remaining, LastAction: spec.LastAction, Files: spec.Files, Data: spec.Data}
	if len(c.Clip()) > 0 {
		spec.Done, spec.Remaining, spec.LastAction, spec.Files, spec.Data = c.TasksCompleted, c.TasksRemaining, c.LastAction, c.Files, c.Data
	}
}

// mergeData adds fields to the previous checkpoint's data object.
func mergeData(cp *teambus.Checkpoint, add map[string]any) json.RawMessage {
	data := map[string]any{}
	if cp != nil && len(cp.Data) > 0 {
		_ = json.Unmarshal(cp.Data, &data) // data is optional context for the brief
		if data == nil {
			data = map[string]any{}
		}
	}
	for k, v := range add {
		data[k] = v
	}
	raw, _ := json.Marshal(data)
	return raw
}

// condition records a liveness condition from Notification or StopFailure
// (§12.3.14). No output.
func (h *hook) condition(ctx context.Context) int {
	var cond string
	if h.cfg.Event == "StopFailure" {
		cond = h.p.Error
		if cond == "" {
			cond = "error"
		}
	} else {
		switch h.p.NotificationType {
		case "permission_prompt":
			cond = "approval"
		case "agent_needs_input":
			cond = "input"
		case "idle_prompt":
			cond = "idle"
		default:
			return 0
		}
	}
	cond = Clean(clipChars(cond, 60))
	if h.b.Lead() {
		return 0
	}
	if err := h.connect(ctx); err != nil {
		return h.fail(err)
	}
	h.setCondition(ctx, cond)
	h.flush(ctx)
	h.rec.Outcome = "condition " + cond
	return 0
}

// sessionEnd is SessionEnd (§12.3.15). /clear and /resume continue the
// process: nothing to do. Any other reason is a clean exit: clean_exit in
// the binding, a final checkpoint of the held task, and SIGTERM to the
// sidecar (its clean shutdown). The spec sends SIGTERM before the
// checkpoint; here the checkpoint goes first, bounded, because the
// sidecar's shutdown releases the task and a checkpoint after it is
// refused — the SIGTERM is deferred so it is sent on every path.
func (h *hook) sessionEnd(ctx context.Context) int {
	switch h.p.Reason {
	case "clear", "resume":
		h.rec.Outcome = "continues"
		return 0
	}
	h.updateBinding(ctx, func(b *binding.Binding) bool { b.CleanExit = true; return true })
	defer h.stopSidecar()
	if h.b.Lead() {
		return 0
	}
	cctx, cancel := context.WithTimeout(ctx, min(h.remaining(), time.Second))
	defer cancel()
	if err := h.connect(cctx); err != nil {
		return h.fail(err)
	}
	if t := h.heldTask(cctx); t != nil {
		spec := carry(t.Checkpoint)
		spec.LastAction = fmt.Sprintf("session ended (%s)", Clean(clipChars(h.p.Reason, 40)))
		spec.Task, spec.Actor = t.ID, h.actor()
		fit(&spec)
		if _, err := h.api.Checkpoint(cctx, spec); err != nil {
			h.rec.Error = Clean(clipChars(err.Error(), 300))
		}
	}
	h.rec.Outcome = "clean-exit"
	return 0
}

// stopSidecar sends SIGTERM to the binding's sidecar when it still runs.
func (h *hook) stopSidecar() {
	if h.sidecarAlive() {
		_ = syscall.Kill(h.b.SidecarPID, syscall.SIGTERM) // the sidecar also stops on its own when the session is gone
	}
}

// agentTeam records Claude's own agent-team events in the lead's session
// (§12.3.16): every one is logged; TaskCompleted of a task teambus has
// assigned to another member is refused (exit 2), and TeammateIdle of a
// member with unread mail or available work keeps it going (exit 2).
func (h *hook) agentTeam(ctx context.Context) int {
	if !h.b.Lead() {
		return 0
	}
	if err := h.connect(ctx); err != nil {
		return h.fail(err)
	}
	name := Clean(clipChars(h.p.TeammateName, 64))
	taskID := Clean(clipChars(h.p.TaskID, 64))
	typ := "claude." + map[string]string{"TeammateIdle": "teammate_idle", "TaskCreated": "task_created", "TaskCompleted": "task_completed"}[h.cfg.Event]
	h.logEvent(ctx, typ, map[string]any{"teammate": name, "task_id": taskID, "subject": Clean(clipChars(h.p.TaskSubject, 200))})
	switch h.cfg.Event {
	case "TaskCompleted":
		id := "cc-" + taskID
		if teambus.ValidateID("task", id) != nil {
			return 0
		}
		st, err := h.api.Status(ctx, teamapi.StatusRequest{Actor: h.actor(), Task: id})
		if t := st.Task; err == nil && t != nil && t.AssignedTo != "" && name != "" && t.AssignedTo != name {
			h.rec.Outcome = "refused"
			fmt.Fprintf(h.errw, "teambus: task %s is assigned to %s; do not complete it here\n", id, t.AssignedTo)
			h.errw.Close()
			return 2
		}
	case "TeammateIdle":
		if teambus.ValidateMemberID(name) != nil {
			return 0
		}
		v, err := teamapi.As[team.View](h.api.Show(ctx, teamapi.ShowRequest{Actor: h.actor()}))
		if err != nil || !slices.ContainsFunc(v.Members, func(m team.MemberView) bool { return m.ID == name }) {
			return 0
		}
		avail := 0
		for _, t := range v.Tasks {
			if t.Status == teambus.TaskAvailable {
				avail++
			}
		}
		if avail > 0 {
			h.rec.Outcome = "keep-working"
			fmt.Fprintf(h.errw, "teambus: %d task(s) are available in team %s: take one with `teambus task next`\n", avail, h.b.Team)
			h.errw.Close()
			return 2
		}
	}
	return 0
}

var _ = os.Getpid
var _ = strconv.Itoa
