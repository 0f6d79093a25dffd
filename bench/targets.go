package bench

import (
	"fmt"
	"os"
)

func mkdir(dir string) error { return os.MkdirAll(dir, 0o700) }

// compareAll adds to every teambus row its ratio to the peers it replaces.
func (r *run) compareAll() {
	for _, sfx := range []string{"", keyIntervalSfx} {
		r.res.compare(keyAsync+sfx, keyJSONL, keyFsync)
		r.res.compare(keyMbSend+sfx, keyJSONL, keyInbox+"1000")
		r.res.compare(keySvcSend+sfx, keyJSONL, keyInbox+"1000")
		r.res.compare(keyReqSend+sfx, keyJSONL, keyInbox+"1000")
		r.res.compare(keyReqAsync+sfx, keyJSONL, keyFsync)
		for _, n := range batchSizes {
			r.res.compare(fmt.Sprint(keyBatch, n)+sfx, keyJSONL, keyFsync)
		}
	}
	r.res.compare(keyOneShot, keyJSONLOnce)
	r.res.compare(keyOneShotClient, keyJSONLOnce)
	r.res.compare(keyOneShotAgent, keyJSONLOnce)
	r.res.compare(keyHookEmpty, keyHookPeer)
	r.res.compare(keyHookCreds, keyHookPeer)
	r.res.compare(keyMCPSend, keyMCPDirect)
	r.res.compare(keyInboxAck, keyInboxRead)
	r.res.compare(keyClaim, keyStateClaim)
	r.res.compare(keyClaimProc, keyClaimProcPeer)
	for _, m := range r.cfg.ResumeMembers {
		r.res.compare(fmt.Sprintf("tb.resume.%d", m), fmt.Sprintf("peer.resume.%d", m))
	}
}

// targets checks the goals of the issue against this run.
func (r *run) targets() []Target {
	var out []Target
	ratio := func(text, key, peer string, want float64, atLeast bool) {
		v, ok := r.res.ratio(key, peer)
		t := Target{Text: text, Skipped: !ok}
		if ok {
			t.Got = fmt.Sprintf("%s×", trim(v))
			t.Holds = (atLeast && v >= want) || (!atLeast && v <= want)
		}
		out = append(out, t)
	}
	value := func(text, key string, format string, ok func(float64) bool, extra string) {
		row := r.res.Row(key)
		t := Target{Text: text, Skipped: row == nil}
		if row != nil {
			t.Got = fmt.Sprintf(format, row.Value) + extra
			t.Holds = ok(row.Value)
		}
		out = append(out, t)
	}
	ratio("pipelined durable send ≥ 1.0× JSONL append + fsync", keyAsync, keyJSONL, 1.0, true)
	ratio("pipelined durable send ≥ 0.8× the 4 KiB write + fsync loop", keyAsync, keyFsync, 0.8, true)
	ratio("batched durable send (64 an atomic batch) ≥ 2× JSONL append + fsync per message", fmt.Sprint(keyBatch, 64), keyJSONL, 2, true)
	ratio("one-shot `teambus send` as an agent runs it in a hook-bound session ≤ 2.5× a one-shot JSONL append + fsync process", keyOneShotAgent, keyJSONLOnce, 2.5, false)
	ratio("claims/s, 4 concurrent one-shot claimers, 11k tasks ≥ 1.5× the flock'd state.json peer", keyClaimProc, keyClaimProcPeer, 1.5, true)
	ratio("sending into a 1,000-message inbox (team.Service.Send) ≥ 50× the inbox file", keySvcSend, keyInbox+"1000", 50, true)
	ratio("sending into a 1,000-message inbox (Mailbox.Send) ≥ 50× the inbox file", keyMbSend, keyInbox+"1000", 50, true)
	lat := func(text, key string, p99 bool, want float64) {
		row := r.res.Row(key)
		t := Target{Text: text, Skipped: row == nil || row.Skipped}
		if !t.Skipped {
			v, q := row.P50, "p50"
			if p99 {
				v, q = row.P99, "p99"
			}
			t.Got = fmt.Sprintf("%s ms %s", trim(v), q)
			t.Holds = v <= want
		}
		out = append(out, t)
	}
	lat("`teambus hook PostToolBatch` with nothing to deliver: p50 ≤ 15 ms", keyHookEmpty, false, 15)
	lat("`teambus hook PostToolBatch` with nothing to deliver: p99 ≤ 60 ms", keyHookEmpty, true, 60)
	ratio("`teambus hook PostToolBatch` with nothing to deliver ≤ 4× a one-shot JSONL append + fsync process", keyHookEmpty, keyHookPeer, 4, false)
	lat("`teambus hook PostToolBatch` on a member credential: p50 ≤ 15 ms", keyHookCreds, false, 15)
	ratio("`teambus hook PostToolBatch` on a member credential ≤ 4× a one-shot JSONL append + fsync process", keyHookCreds, keyHookPeer, 4, false)
	lat("`teambus hook SessionStart` with registration and sidecar spawn: p50 ≤ 60 ms", keyHookSStart, false, 60)
	lat("transcript sync added to a PostToolBatch hook, 10 MB transcript growing by 20 KB: p50 ≤ 3 ms", keyTrSync, false, 3)
	value("bytes stored per transcript ≤ 1.1× its size", keyTrBytes, "%.4f×", func(v float64) bool { return v <= 1.1 }, "")
	ratio("send tool call through `teambus mcp` ≤ 2× a direct in-process send", keyMCPSend, keyMCPDirect, 2, false)
	lat("inbox tool call of 50 messages through `teambus mcp`: p50 ≤ 10 ms", keyMCPInbox50, false, 10)
	sizes := ""
	if r.cfg.ResumeTasks != 10000 || r.cfg.ResumeMessages != 1000000 {
		sizes = fmt.Sprintf(" (at %d tasks, %d messages)", r.cfg.ResumeTasks, r.cfg.ResumeMessages)
	}
	value("resume ≤ 100 ms for 50 members, 10,000 tasks, 1,000,000 messages", "tb.resume.50", "%.1f ms p50", func(v float64) bool { return v <= 100 }, sizes)
	restart := fmt.Sprintf(" (%d teams × %d messages)", len(r.cfg.ResumeMembers), r.cfg.ResumeMessages)
	value("node ready after a clean restart with 4 × 1M stored messages ≤ 1 s", "tb.restart", "%.0f ms", func(v float64) bool { return v <= 1000 }, restart)
	value("its start-up store check done ≤ 1 s after the start", "tb.storecheck", "%.0f ms", func(v float64) bool { return v <= 1000 }, restart)
	value("crash detection ≤ timeout + 0.3 s at p99 (heartbeat silence)", "tb.detect.silence", "timeout + %.2f s", func(v float64) bool { return v <= 0.3 }, "")
	value("crash detection ≤ 0.2 s after a pid exit (p99)", "tb.detect.pid", "%.2f s", func(v float64) bool { return v <= 0.2 }, "")
	value("agent connection lost (no pid watcher) → probe started ≤ 0.5 s (p99)", "tb.detect.connlost", "%.2f s", func(v float64) bool { return v <= 0.5 }, "")
	lat("agent pid exit → respawned session's first model request (fake API, headless, policy auto) ≤ 3 s", keyRespawn, false, 3000)
	value("zombie within lead-timeout + 0.3 s (p99)", "tb.detect.zombie", "lead-timeout + %.2f s", func(v float64) bool { return v <= 0.3 }, "")
	value("bus idle ≤ 25 MiB", "tb.mem.bus.idle", "%.1f MiB", func(v float64) bool { return v <= 25 }, "")
	value("sidecar ≤ 15 MiB", "tb.mem.teammate", "%.1f MiB", func(v float64) bool { return v <= 15 }, "")
	teams := ""
	if r.cfg.MemoryTeams != 1000 {
		teams = fmt.Sprintf(" (at %d teams)", r.cfg.MemoryTeams)
	}
	value("1,000 teams created by 4 concurrent creators on default flags ≤ 150 s", "tb.scale.teams", "%.1f s", func(v float64) bool { return v <= 150 }, teams)
	value("then `team list --json` ≤ 2 s", "tb.scale.list", "%.2f s", func(v float64) bool { return v <= 2 }, teams)
	value("idle memory per team ≤ 0.5 MiB", "tb.mem.team", "%.2f MiB", func(v float64) bool { return v <= 0.5 }, teams)
	members := ""
	if r.cfg.ScaleMembers != 1000 {
		members = fmt.Sprintf(" (at %d members)", r.cfg.ScaleMembers)
	}
	lat("another team's `team show` while one member holds 300 long-polls: p99 ≤ 100 ms", keyFairBusy, true, 100)
	value("1,000 members at 1 s heartbeats under a quarter of one core", "tb.scale.cpu", "%.1f%% of a core", func(v float64) bool { return v < 25 }, members)
	return out
}
