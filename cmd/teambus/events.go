package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/internal/atomicfile"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// eventsCommand is `teambus events`: the team's event log in the
// JSONL event envelope.
func eventsCommand() *cli.Command {
	return &cli.Command{
		Name:  "events",
		Usage: "the team's event log (one JSON envelope a line): append, analyze, import, export, replay",
		Description: "Every team has a durable event log. Agents and hooks append their own events; teambus logs\n" +
			"what it does (claims, crashes, zombie mode, resumes, checkpoints). `events analyze` finds the\n" +
			"interrupted session and decides how to resume it (auto_resume, needs_decision, no_checkpoint,\n" +
			"clean); with --file it reads a JSONL file and needs no bus.",
		Subcommands: []*cli.Command{
			eventsAppendCommand(),
			eventsAnalyzeCommand(),
			eventsImportCommand(),
			eventsExportCommand(),
			eventsReplayCommand(),
		},
	}
}

func eventsAppendCommand() *cli.Command {
	return &cli.Command{
		Name:  "append",
		Usage: "append an event (prints where it was stored)",
		Flags: flags(connFlags(), []cli.Flag{teamFlag(), sessionFlag(),
			&cli.StringFlag{Name: "type", Usage: "event type: lowercase words joined by dots, e.g. task.started, error.encountered, checkpoint"},
			&cli.StringFlag{Name: "sid", Usage: "session id of the event (default: --session)", EnvVars: []string{"TEAMBUS_EVENT_SID"}},
			&cli.Int64Flag{Name: "seq", Usage: "sequence number within the session", Value: eventlog.AutoSeq, DefaultText: "the session's next"},
			&cli.StringFlag{Name: "agent", Usage: "the agent the event is about"},
			&cli.StringFlag{Name: "feature", Usage: "the feature (default: the team id)"},
			&cli.StringFlag{Name: "pane-id", Usage: "terminal pane of the agent", EnvVars: []string{"TEAMBUS_PANE_ID"}},
			&cli.StringFlag{Name: "data", Usage: "JSON data of the event (- reads it from stdin)"},
			&cli.StringFlag{Name: "ts", Usage: "the event's time, RFC 3339 (default: now)"},
			jsonFlag(),
		}),
		Action: teamAction(0, eventsAppend),
	}
}

func eventsAppend(c *cli.Context, teamID string) error {
	if c.String("type") == "" {
		return usageError(c, "missing --type")
	}
	sid := c.String("sid")
	if sid == "" {
		sid = c.String("session")
	}
	if sid == "" {
		return usageError(c, "missing --sid (or --session / TEAMBUS_SESSION)")
	}
	e := eventlog.Event{V: eventlog.Version, SID: sid, Seq: c.Int64("seq"), Type: c.String("type"),
		Agent: c.String("agent"), Feature: c.String("feature"), PaneID: c.String("pane-id")}
	if e.Feature == "" {
		e.Feature = teamID
	}
	var err error
	if v := c.String("ts"); v != "" {
		if e.TS, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return teambus.Invalidf("invalid --ts %q: an RFC 3339 time such as 2026-11-22T10:00:00Z", v)
		}
	}
	if d := c.String("data"); d != "" {
		b := []byte(d)
		if d == "-" {
			if b, err = io.ReadAll(io.LimitReader(c.App.Reader, eventlog.MaxSize+1)); err != nil {
				return fmt.Errorf("read --data from stdin: %w", err)
			}
		}
		if err := teambus.ValidateData(b); err != nil {
			return err
		}
		e.Data = compactJSON(b)
	}
	if e.Seq < eventlog.AutoSeq {
		return teambus.Invalidf("invalid --seq %d: 0 or more", e.Seq)
	}
	if err := e.Validate(); err != nil {
		return err
	}
	s, err := open(c)
	if err != nil {
		return err
	}
	defer s.close()
	if _, err := s.svc.Team(s.ctx, teamID); err != nil {
		return err
	}
	res, err := s.svc.Events(teamID).Append(s.ctx, &e)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, res)
	}
	line := fmt.Sprintf("stored event %s seq %d at log seq %d", res.SID, res.Seq, res.StreamSeq)
	if res.Duplicate {
		line = fmt.Sprintf("event %s seq %d was stored before (duplicate): nothing stored", res.SID, res.Seq)
	}
	fmt.Fprintln(c.App.Writer, line)
	return nil
}

// compactJSON returns valid JSON b on one line.
func compactJSON(b []byte) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return b
	}
	return buf.Bytes()
}

func eventsAnalyzeCommand() *cli.Command {
	return &cli.Command{
		Name:  "analyze",
		Usage: "find the interrupted session and decide how to resume it",
		Description: "Reads the team's event log (--team), or a JSONL file (--file, no bus needed), and runs its\n" +
			"detection (sessions without session.end, most recent first), analysis (seq gaps, last checkpoint,\n" +
			"task states, active agents, issues and warnings after the checkpoint) and decision:\n" +
			"auto_resume, needs_decision, no_checkpoint or clean. Damaged lines (junk, truncated writes)\n" +
			"are reported and skipped; of lines with the same sid and seq the later one wins.",
		Flags: flags(connFlags(), []cli.Flag{teamFlag(),
			&cli.StringFlag{Name: "file", Usage: "analyze this JSONL file instead of a team's log (no bus needed)"},
			&cli.StringFlag{Name: "sid", Usage: "analyze this session instead of the most recent interrupted one"},
			jsonFlag(),
		}),
		Action: eventsAnalyze,
	}
}

func eventsAnalyze(c *cli.Context) error {
	if err := exactArgs(c, 0); err != nil {
		return err
	}
	opts := eventlog.AnalyzeOptions{SID: c.String("sid")}
	var (
		res    *eventlog.Analysis
		source string
		err    error
	)
	if path := c.String("file"); path != "" {
		// A file needs no bus: nothing here connects.
		if _, err := os.Stat(path); err != nil {
			return teambus.Invalidf("events file %s: %w", path, errorCause(err))
		}
		source = path
		res, err = eventlog.AnalyzeJSONL(func() (io.ReadCloser, error) { return os.Open(path) }, opts)
		if err != nil {
			return err
		}
	} else {
		teamID, err := teamID(c)
		if err != nil {
			return usageError(c, "give --team T (the team's log) or --file F (a JSONL file)")
		}
		source = "team " + teamID
		err = withTeamLog(c, teamID, func(s *streamSession) error {
			res, err = s.svc.Events(teamID).Analyze(c.Context, opts)
			return err
		})
		if err != nil {
			return err
		}
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, res)
	}
	printAnalysis(c.App.Writer, source, res)
	return nil
}

// errorCause is the cause of a path error, without the path.
func errorCause(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// streamSession is a connection for a command that streams for as long as
// it takes: --timeout bounds connecting, not the stream.
type streamSession struct {
	conn *bus.Conn
	svc  *team.Service
}

// withTeamLog connects, checks that the team exists and runs fn.
func withTeamLog(c *cli.Context, teamID string, fn func(*streamSession) error) error {
	conn, err := streamConn(c)
	if err != nil {
		return err
	}
	defer conn.Close()
	keepConn(c, conn)
	svc := team.New(conn.JS, team.Config{})
	if _, err := svc.Team(c.Context, teamID); err != nil {
		return err
	}
	return fn(&streamSession{conn: conn, svc: svc})
}

// printAnalysis prints the analysis as the event-log analysis presents it.
func printAnalysis(w io.Writer, source string, a *eventlog.Analysis) {
	fmt.Fprintf(w, "Resume analysis of %s: %d line(s), %d event(s), %d session(s)", source, a.Lines, a.Events, len(a.Sessions))
	if n := len(a.Damaged) + int(a.Omitted["damaged"]); n > 0 {
		fmt.Fprintf(w, ", %d damaged line(s) skipped", n)
	}
	if n := len(a.Duplicates) + int(a.Omitted["duplicates"]); n > 0 {
		fmt.Fprintf(w, ", %d duplicate(s) (later line wins)", n)
	}
	fmt.Fprintln(w)
	for _, d := range a.Damaged {
		fmt.Fprintf(w, "  skipped line %d: %s\n", d.Line, teambus.SanitizeLine(d.Reason))
	}
	fmt.Fprintln(w, "\nSessions (most recent first):")
	for _, s := range a.Sessions {
		state := "ended"
		if s.Interrupted {
			state = "INTERRUPTED (no session.end)"
		}
		extra := ""
		if s.Resumed {
			extra += ", resumed"
		}
		if s.Gaps > 0 {
			extra += fmt.Sprintf(", %d missing in %d gap(s)", s.Missing, s.Gaps)
		}
		fmt.Fprintf(w, "  %-20s %s .. %s  %d event(s), seq %d-%d%s  %s\n", s.SID, formatTime(s.FirstTS), formatTime(s.LastTS), s.EventCount, s.FirstSeq, s.LastSeq, extra, state)
	}
	if a.Analyzed == nil {
		fmt.Fprintf(w, "\nDecision: %s\n", a.Decision)
		for _, r := range a.Reasons {
			fmt.Fprintf(w, "  - %s\n", r)
		}
		return
	}
	fmt.Fprintf(w, "\nAnalyzed session: %s", *a.Analyzed)
	if len(a.InterruptedSessions) > 1 {
		fmt.Fprintf(w, " (the most recent of %d interrupted sessions)", len(a.InterruptedSessions))
	}
	fmt.Fprintln(w)
	for _, g := range a.Gaps {
		fmt.Fprintf(w, "  gap: seq jumps from %d to %d (%d missing)\n", g.AfterSeq, g.ActualSeq, g.MissingCount)
	}
	if cp := a.LastCheckpoint; cp != nil {
		var d struct {
			Label    string `json:"label"`
			PlanStep string `json:"plan_step"`
			TaskID   string `json:"taskId"`
		}
		_ = json.Unmarshal(cp.Data, &d)
		if d.Label == "" && cp.Type == eventlog.EvTaskCheckpoint {
			d.Label = "task " + d.TaskID
		}
		fmt.Fprintf(w, "Last checkpoint: seq %d %q", cp.Seq, d.Label)
		if d.PlanStep != "" {
			fmt.Fprintf(w, ", next step %s", d.PlanStep)
		}
		fmt.Fprintln(w)
	} else {
		fmt.Fprintln(w, "No checkpoint found: interrupted during early execution.")
	}
	printEvents(w, "Issues after the checkpoint", a.Issues, a.Omitted["issues"])
	printEvents(w, "Resolved errors after the checkpoint", a.Resolved, a.Omitted["resolved"])
	printEvents(w, "Warnings after the checkpoint", a.Warnings, a.Omitted["warnings"])
	if len(a.Tasks) > 0 {
		fmt.Fprintln(w, "Task state:")
		ids := make([]string, 0, len(a.Tasks))
		for id := range a.Tasks {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			t := a.Tasks[id]
			line := fmt.Sprintf("  %s: %s", id, t.Status)
			if t.Agent != "" {
				line += " (" + t.Agent + ")"
			}
			if t.Error != "" {
				line += ": " + teambus.OneLine(t.Error, 80)
			}
			fmt.Fprintln(w, line)
		}
	}
	if len(a.ActiveAgents) > 0 {
		fmt.Fprintf(w, "Active agents at interruption: %s\n", strings.Join(a.ActiveAgents, ", "))
	}
	fmt.Fprintf(w, "\nDecision: %s\n", a.Decision)
	for _, r := range a.Reasons {
		fmt.Fprintf(w, "  - %s\n", r)
	}
}

func printEvents(w io.Writer, title string, evs []eventlog.Event, omitted int64) {
	if len(evs) == 0 {
		return
	}
	fmt.Fprintf(w, "%s:\n", title)
	for i, e := range evs {
		fmt.Fprintf(w, "  %d. seq %d [%s]", i+1, e.Seq, e.Type)
		if e.Agent != "" {
			fmt.Fprintf(w, " %s", e.Agent)
		}
		if len(e.Data) > 0 {
			fmt.Fprintf(w, " %s", teambus.OneLine(string(e.Data), 120))
		}
		fmt.Fprintln(w)
	}
	if omitted > 0 {
		fmt.Fprintf(w, "  (and %d earlier)\n", omitted)
	}
}

func eventsImportCommand() *cli.Command {
	return &cli.Command{
		Name:  "import",
		Usage: "import a JSONL event log into a team's log (idempotent: importing twice stores it once)",
		Flags: flags(connFlags(), []cli.Flag{teamFlag(),
			&cli.StringFlag{Name: "file", Usage: "the JSONL file to import"},
			jsonFlag(),
		}),
		Action: teamAction(0, eventsImport),
	}
}

func eventsImport(c *cli.Context, teamID string) error {
	path := c.String("file")
	if path == "" {
		return usageError(c, "missing --file")
	}
	f, err := os.Open(path)
	if err != nil {
		return teambus.Invalidf("events file %s: %w", path, errorCause(err))
	}
	defer f.Close()
	var res eventlog.ImportResult
	err = withTeamLog(c, teamID, func(s *streamSession) error {
		res, err = s.svc.Events(teamID).Import(c.Context, f)
		return err
	})
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, res)
	}
	fmt.Fprintf(c.App.Writer, "imported %d event(s) from %s into team %s: %d duplicate(s) already in the log, %d superseded by a later line, %d line(s) skipped\n",
		res.Imported, path, teamID, res.Duplicates, res.Superseded, res.SkippedCount)
	for _, d := range res.Skipped {
		fmt.Fprintf(c.App.Writer, "  skipped line %d: %s\n", d.Line, teambus.SanitizeLine(d.Reason))
	}
	if n := res.SkippedCount - int64(len(res.Skipped)); n > 0 {
		fmt.Fprintf(c.App.Writer, "  (and %d more)\n", n)
	}
	return nil
}

func eventsExportCommand() *cli.Command {
	return &cli.Command{
		Name:  "export",
		Usage: "write a team's event log as JSONL, each event exactly as stored",
		Flags: flags(connFlags(), []cli.Flag{teamFlag(),
			&cli.StringFlag{Name: "file", Usage: "write to this file, replaced atomically (default: stdout)"},
		}),
		Action: teamAction(0, eventsExport),
	}
}

func eventsExport(c *cli.Context, teamID string) error {
	path := c.String("file")
	if cr, err := flagCreds(c); err == nil && cr != nil {
		return eventsExportAsLead(c, teamID, path)
	}
	return withTeamLog(c, teamID, func(s *streamSession) error {
		ev := s.svc.Events(teamID)
		if path == "" {
			_, err := ev.Export(c.Context, c.App.Writer)
			return err
		}
		var n int64
		err := atomicfile.WriteFunc(path, 0o600, func(w io.Writer) error {
			var err error
			n, err = ev.Export(c.Context, w)
			return err
		})
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			return teambus.Invalidf("export events to %s: %w", path, errorCause(err))
		}
		if err != nil {
			return fmt.Errorf("export events to %s: %w", path, err)
		}
		fmt.Fprintf(c.App.Writer, "exported %d event(s) of team %s to %s\n", n, teamID, path)
		return nil
	})
}

func eventsReplayCommand() *cli.Command {
	return &cli.Command{
		Name:  "replay",
		Usage: "print a team's event log in order, for audit",
		Flags: flags(connFlags(), []cli.Flag{teamFlag(),
			&cli.StringFlag{Name: "type", Usage: "only events of this type"},
			&cli.StringFlag{Name: "agent", Usage: "only events about this agent"},
			&cli.StringFlag{Name: "sid", Usage: "only events of this session"},
			&cli.StringFlag{Name: "since", Usage: "start at this log seq, or at this event time (RFC 3339)"},
			&cli.StringFlag{Name: "until", Usage: "stop after this log seq, or this event time (RFC 3339)"},
			&cli.IntFlag{Name: "limit", Usage: "at most this many events (0: all)"},
			&cli.BoolFlag{Name: "follow", Usage: "keep printing new events until interrupted"},
			jsonFlag(),
		}),
		Action: teamAction(0, eventsReplay),
	}
}

func eventsReplay(c *cli.Context, teamID string) error {
	f := eventlog.EventFilter{Type: c.String("type"), Agent: c.String("agent"), SID: c.String("sid"), Limit: c.Int("limit"), Follow: c.Bool("follow")}
	var err error
	if f.SinceSeq, f.SinceTime, err = parseSeqOrTime("--since", c.String("since")); err != nil {
		return err
	}
	if f.UntilSeq, f.UntilTime, err = parseSeqOrTime("--until", c.String("until")); err != nil {
		return err
	}
	if err := f.Validate(); err != nil {
		return err
	}
	asJSON := c.Bool("json")
	w := c.App.Writer
	return withTeamLog(c, teamID, func(s *streamSession) error {
		return s.svc.Events(teamID).Replay(c.Context, f, func(r *eventlog.EventRecord) error {
			if asJSON {
				// The envelope exactly as stored: JSON Lines as export writes.
				if _, err := w.Write(r.Raw); err != nil {
					return err
				}
				_, err := io.WriteString(w, "\n")
				return err
			}
			printEventRecord(w, r)
			return nil
		})
	})
}

func printEventRecord(w io.Writer, r *eventlog.EventRecord) {
	if r.Err != nil {
		fmt.Fprintf(w, "#%d (not an event: %v) %s\n", r.StreamSeq, r.Err, teambus.OneLine(string(r.Raw), 120))
		return
	}
	e := &r.Event
	line := fmt.Sprintf("#%d %s %s/%d [%s]", r.StreamSeq, formatTime(e.TS), e.SID, e.Seq, e.Type)
	if e.Agent != "" {
		line += " " + e.Agent
	}
	if len(e.Data) > 0 {
		line += " " + teambus.OneLine(string(e.Data), 160)
	}
	fmt.Fprintln(w, line)
}

// eventsExportAsLead exports the team's event log on the lead's
// credential, page by page through the team service.
func eventsExportAsLead(c *cli.Context, teamID, path string) error {
	s, err := openSession(c, true)
	if err != nil {
		return err
	}
	defer s.close()
	api := s.lead(teamID, "")
	write := func(w io.Writer) (int64, error) {
		var n int64
		var since uint64
		for {
			page, err := api.Events(s.ctx, teamapi.EventsRequest{Actor: team.Actor{Team: teamID, Member: teambus.Lead}, SinceSeq: since})
			if err != nil {
				return n, err
			}
			for _, e := range page.Events {
				if _, err := fmt.Fprintf(w, "%s\n", e); err != nil {
					return n, err
				}
				n++
			}
			if page.Next == 0 {
				return n, nil
			}
			since = page.Next
		}
	}
	if path == "" {
		_, err := write(c.App.Writer)
		return err
	}
	var n int64
	err = atomicfile.WriteFunc(path, 0o600, func(w io.Writer) error {
		var err error
		n, err = write(w)
		return err
	})
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return teambus.Invalidf("export events to %s: %w", path, errorCause(err))
	}
	if err != nil {
		return fmt.Errorf("export events to %s: %w", path, err)
	}
	fmt.Fprintf(c.App.Writer, "exported %d event(s) of team %s to %s\n", n, teamID, path)
	return nil
}
