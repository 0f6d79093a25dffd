package team

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/internal/atomicfile"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/mailbox"
)

// CheckpointTeam records a team checkpoint: the team's checkpoint
// sequence goes up by one and a checkpoint event (seed 004: a safe point
// to resume from) is logged in the team session with label, which
// defaults to "team-checkpoint-N". The event is part of the operation:
// when it can not be stored the error is returned.
func (s *Service) CheckpointTeam(ctx context.Context, team, label string) (*teambus.Team, error) {
	if err := teambus.ValidateID("team", team); err != nil {
		return nil, err
	}
	if len(label) > 200 {
		return nil, teambus.Invalidf("checkpoint label is %d bytes, at most 200", len(label))
	}
	t, err := s.UpdateTeam(ctx, team, func(t *teambus.Team) (bool, error) {
		t.CheckpointSeq++
		t.UpdatedAt = s.Now()
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	if label == "" {
		label = fmt.Sprintf("team-checkpoint-%d", t.CheckpointSeq)
	}
	counts := map[string]int{}
	if snap, err := s.store.Snapshot(ctx, team); err == nil {
		for st, n := range teambus.CountByStatus(snap.Tasks) {
			counts[string(st)] = n
		}
	}
	data, _ := json.Marshal(map[string]any{"label": label, "checkpoint_seq": t.CheckpointSeq, "status": t.Status,
		"resumable": !t.Closed(), "tasks": counts})
	e := &eventlog.Event{TS: s.Now().Truncate(time.Millisecond), SID: SessionID(team), Seq: eventlog.AutoSeq, Type: eventlog.EvCheckpoint, Feature: team, Data: data}
	if _, err := s.Events(team).Append(ctx, e); err != nil {
		return t, fmt.Errorf("log checkpoint %d of team %s: %w", t.CheckpointSeq, team, err)
	}
	return t, nil
}

// CheckpointState is state.json of an exported checkpoint: the team, its
// members and its tasks, both sorted by id.
type CheckpointState struct {
	Team    *teambus.Team   `json:"team"`
	Members []MemberView    `json:"members"`
	Tasks   []*teambus.Task `json:"tasks"`
	// Damaged are the records left out because they do not decode.
	Damaged []kv.DamagedRecord `json:"damaged,omitempty"`
}

// Export is what ExportCheckpoint wrote.
type Export struct {
	Dir           string   `json:"dir"`
	Files         []string `json:"files"`
	CheckpointSeq int64    `json:"checkpoint_seq"`
	Messages      int64    `json:"messages"`
	Events        int64    `json:"events"`
	// Transcripts is how many Claude Code transcripts were copied
	// (transcript.go).
	Transcripts int `json:"transcripts"`
}

// Export file names.
const (
	StateFile   = "state.json"
	MailboxFile = "mailbox.jsonl"
	EventsFile  = "events.jsonl"
)

// ExportCheckpoint writes the team to dir in a layout a user can commit to
// git: state.json (the team, members and tasks: indented, sorted, the
// same bytes for the same state), mailbox.jsonl (every message in seq
// order, one JSON object per line as `teambus replay --json` prints them),
// events.jsonl (the event log exactly as stored, as `teambus events
// export` writes it) and the members' Claude Code transcripts
// (transcripts.json and transcripts/<member>/<session>.jsonl). Each file
// is replaced atomically.
func (s *Service) ExportCheckpoint(ctx context.Context, team, dir string) (*Export, error) {
	v, err := s.Show(ctx, team)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, teambus.Invalidf("export to %s: %w", dir, err)
	}
	out := &Export{Dir: dir, CheckpointSeq: v.Team.CheckpointSeq}
	state := CheckpointState{Team: v.Team, Members: v.Members, Tasks: append([]*teambus.Task{}, v.Tasks...), Damaged: v.Damaged}
	sort.Slice(state.Tasks, func(i, j int) bool { return state.Tasks[i].ID < state.Tasks[j].ID })
	err = writeExport(dir, StateFile, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(state)
	})
	if err != nil {
		return nil, err
	}
	out.Files = append(out.Files, filepath.Join(dir, StateFile))
	err = writeExport(dir, MailboxFile, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		return s.Mailbox(team).Replay(ctx, mailbox.ReplayFilter{}, func(m teambus.Message) error {
			out.Messages++
			m.Held = false
			if len(m.Data) == 0 {
				m.Data = json.RawMessage("null")
			}
			m.TS = m.TS.UTC()
			return enc.Encode(m)
		})
	})
	if err != nil {
		return nil, err
	}
	out.Files = append(out.Files, filepath.Join(dir, MailboxFile))
	err = writeExport(dir, EventsFile, func(w io.Writer) error {
		n, err := s.Events(team).Export(ctx, w)
		out.Events = n
		return err
	})
	if err != nil {
		return nil, err
	}
	out.Files = append(out.Files, filepath.Join(dir, EventsFile))
	if err := s.exportTranscripts(ctx, team, dir, out); err != nil {
		return nil, err
	}
	return out, nil
}

// writeExport writes dir/name atomically and durably (mode 0644).
func writeExport(dir, name string, fn func(io.Writer) error) error {
	if err := atomicfile.WriteFunc(filepath.Join(dir, name), 0o644, fn); err != nil {
		return fmt.Errorf("export %s: %w", name, err)
	}
	return nil
}
