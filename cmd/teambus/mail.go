package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/internal/sendcmd"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// sendCommand is `teambus send` (package sendcmd, shared with the lean
// agent build).
func sendCommand() *cli.Command { return sendcmd.Command(sendAction) }

// send is `teambus send BODY`: the request is checked before anything
// connects, then sent through the member's sidecar relay or a connection
// of its own (withMember).
func send(c *cli.Context, a team.Actor) error {
	req, err := sendcmd.Request(c)
	if err != nil {
		return err
	}
	return withMember(c, a, func(s *session, cl *teamapi.Client) error {
		return sendcmd.Send(s.ctx, c, cl, req)
	})
}

func inboxCommand() *cli.Command {
	return &cli.Command{
		Name:  "inbox",
		Usage: "list your unacknowledged mail, oldest first (reading is not acking)",
		Flags: flags(connFlags(), memberFlags(), []cli.Flag{
			&cli.BoolFlag{Name: "ack", Usage: "acknowledge what is printed"},
			&cli.StringFlag{Name: "wait", Usage: "block up to this long until mail arrives (e.g. 30s)"},
			&cli.IntFlag{Name: "limit", Usage: "at most this many messages", Value: 100},
			jsonFlag(),
		}),
		Action: actorAction(0, inbox),
	}
}

func inbox(c *cli.Context, a team.Actor) error {
	var (
		wait time.Duration
		err  error
	)
	if w := c.String("wait"); w != "" {
		if wait, err = teambus.ParseDuration("--wait", w); err != nil {
			return err
		}
		if wait < 0 {
			return teambus.Invalidf("invalid --wait %s: must not be negative", w)
		}
	}
	if c.Int("limit") <= 0 {
		return teambus.Invalidf("invalid --limit %d: must be positive", c.Int("limit"))
	}
	if wait > 0 && !c.IsSet("timeout") {
		// --wait extends the one-shot timeout.
		if err := c.Set("timeout", (wait + 10*time.Second).String()); err != nil {
			return err
		}
	}
	return withMember(c, a, func(s *session, cl *teamapi.Client) error {
		mode := teamapi.InboxPeek
		if c.Bool("ack") {
			mode = teamapi.InboxLease
		}
		leased, err := cl.Read(s.ctx, mode, c.Int("limit"), wait)
		if err != nil {
			return err
		}
		msgs := make([]teambus.Message, len(leased))
		for i, m := range leased {
			msgs[i] = m.Message
		}
		// With --ack the mail is acked only once all of it is written: a
		// failed write acks nothing and the mail is delivered again.
		w := &checkedWriter{w: c.App.Writer}
		if c.Bool("json") {
			jl := newJSONLines(w)
			for _, m := range msgs {
				if err := jl.Write(messageJSON(m)); err != nil {
					w.err = errors.Join(w.err, err)
					break
				}
			}
		} else if len(msgs) == 0 {
			fmt.Fprintln(w, "no unacknowledged mail")
		} else {
			for _, m := range msgs {
				printMessage(w, m)
			}
			if !c.Bool("ack") {
				seqs := make([]string, len(msgs))
				for i, m := range msgs {
					seqs[i] = strconv.FormatUint(m.Seq, 10)
				}
				fmt.Fprintf(w, "(%d unacknowledged; ack with `teambus ack %s`)\n", len(msgs), strings.Join(seqs, " "))
			}
		}
		if err := w.flush(); err != nil {
			if c.Bool("ack") && len(leased) > 0 {
				_, _ = cl.ReleaseLeased(s.ctx, leased)
			}
			return teambus.Unavailablef("write inbox: %w: nothing was acked", err)
		}
		if c.Bool("ack") && len(leased) > 0 {
			if _, err := cl.AckLeased(s.ctx, leased); err != nil {
				return err
			}
		}
		return nil
	})
}

// checkedWriter keeps the first write error; flush reports it after
// syncing a writer that can.
type checkedWriter struct {
	w   io.Writer
	err error
}

func (cw *checkedWriter) Write(p []byte) (int, error) {
	if cw.err != nil {
		return 0, cw.err
	}
	n, err := cw.w.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	cw.err = err
	return n, err
}

func (cw *checkedWriter) flush() error {
	if cw.err != nil {
		return cw.err
	}
	if f, ok := cw.w.(interface{ Flush() error }); ok {
		cw.err = f.Flush()
	}
	return cw.err
}

// messageLine is the JSON form of a message.
type messageLine struct {
	Seq   uint64          `json:"seq"`
	ID    string          `json:"id"`
	From  string          `json:"from"`
	To    string          `json:"to"`
	Type  string          `json:"type"`
	Body  string          `json:"body"`
	Data  json.RawMessage `json:"data"`
	Epoch int64           `json:"epoch"`
	TS    *string         `json:"ts"`
}

func messageJSON(m teambus.Message) messageLine {
	data := m.Data
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	return messageLine{Seq: m.Seq, ID: m.ID, From: m.From, To: m.To, Type: string(m.Type), Body: m.Body, Data: data, Epoch: m.Epoch, TS: jsonTime(m.TS)}
}

func printMessage(w io.Writer, m teambus.Message) {
	fmt.Fprintf(w, "#%d %s %s -> %s [%s] %s\n", m.Seq, formatTime(m.TS), m.From, m.To, m.Type, textBody(m.Body))
	if len(m.Data) > 0 && string(m.Data) != "null" {
		fmt.Fprintf(w, "    data: %s\n", textBody(string(m.Data)))
	}
}

func ackCommand() *cli.Command {
	return &cli.Command{
		Name:      "ack",
		Usage:     "acknowledge mail by sequence number (final; acking twice is harmless)",
		ArgsUsage: "SEQ...",
		Flags:     flags(connFlags(), memberFlags(), []cli.Flag{jsonFlag()}),
		Action:    ack,
	}
}

func ack(c *cli.Context) error {
	if err := minArgs(c, 1); err != nil {
		return err
	}
	a, err := actor(c)
	if err != nil {
		return err
	}
	var seqs []uint64
	for _, arg := range c.Args().Slice() {
		n, err := strconv.ParseUint(strings.TrimPrefix(arg, "#"), 10, 64)
		if err != nil || n == 0 {
			return teambus.Invalidf("invalid sequence %q: a positive number as `teambus inbox` prints it", arg)
		}
		seqs = append(seqs, n)
	}
	return withMember(c, a, func(s *session, cl *teamapi.Client) error {
		res, err := cl.AckSeqs(s.ctx, seqs)
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, res)
		}
		for _, n := range res.Acked {
			fmt.Fprintf(c.App.Writer, "acked seq %d\n", n)
		}
		for _, n := range res.Already {
			fmt.Fprintf(c.App.Writer, "seq %d was already acked\n", n)
		}
		return nil
	})
}

func replayCommand() *cli.Command {
	return &cli.Command{
		Name:  "replay",
		Usage: "print the team's mailbox in seq order, for audit",
		Description: "With the node token: the team's whole mailbox. With a member credential: the member's own\n" +
			"mail (to it, from it, broadcasts), through the team service; --follow needs the node token.",
		Flags: flags(connFlags(), []cli.Flag{teamFlag(), sessionFlag(),
			&cli.StringFlag{Name: "from", Usage: "only mail from this member"},
			&cli.StringFlag{Name: "to", Usage: "only mail to this member (lead, all)"},
			&cli.StringFlag{Name: "type", Usage: "only mail of this type"},
			&cli.StringFlag{Name: "since", Usage: "start at this seq, or this time (RFC 3339)"},
			&cli.StringFlag{Name: "until", Usage: "stop after this seq, or this time (RFC 3339)"},
			&cli.IntFlag{Name: "limit", Usage: "at most this many messages (0: all)"},
			&cli.BoolFlag{Name: "follow", Usage: "keep printing new mail until interrupted"},
			&cli.BoolFlag{Name: "held", Usage: "include mail held while its sender was a zombie"},
			jsonFlag(),
		}),
		Action: teamAction(0, replay),
	}
}

// parseSeqOrTime parses a --since/--until value: a sequence number or an
// RFC 3339 time.
func parseSeqOrTime(name, v string) (uint64, time.Time, error) {
	if v == "" {
		return 0, time.Time{}, nil
	}
	if n, err := strconv.ParseUint(v, 10, 64); err == nil {
		return n, time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return 0, time.Time{}, teambus.Invalidf("invalid %s %q: a sequence number or an RFC 3339 time such as 2026-11-22T10:00:00Z", name, v)
	}
	return 0, t, nil
}

func replayFilter(c *cli.Context) (mailbox.ReplayFilter, error) {
	f := mailbox.ReplayFilter{From: c.String("from"), To: c.String("to"), Type: teambus.MessageType(c.String("type")),
		Limit: c.Int("limit"), Follow: c.Bool("follow"), IncludeHeld: c.Bool("held")}
	var err error
	if f.SinceSeq, f.SinceTime, err = parseSeqOrTime("--since", c.String("since")); err != nil {
		return f, err
	}
	if f.UntilSeq, f.UntilTime, err = parseSeqOrTime("--until", c.String("until")); err != nil {
		return f, err
	}
	return f, f.Validate()
}

func replay(c *cli.Context, teamID string) error {
	f, err := replayFilter(c)
	if err != nil {
		return err
	}
	// Replay streams for as long as it takes (or until interrupted with
	// --follow): --timeout bounds the connection, not the stream.
	conn, err := streamConn(c)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := watchDenied(c, c.Context, func() {}, conn)
	defer cancel()
	jl := newJSONLines(c.App.Writer)
	asJSON := c.Bool("json")
	emit := func(m teambus.Message) error {
		if asJSON {
			return jl.Write(messageJSON(m))
		}
		printMessage(c.App.Writer, m)
		return nil
	}
	if ct, cm, ok := conn.MemberOf(); ok {
		// A member replays its own mail through the team service.
		if ct != teamID {
			return teambus.Invalidf("the credential of %s in team %s reaches only team %s, not %s", cm, ct, ct, teamID)
		}
		cl, err := serviceClient(ctx, conn, team.Actor{Team: ct, Member: cm, Session: c.String("session")})
		if err != nil {
			return err
		}
		if err := teamapi.ReplayOwn(ctx, cl, teamapi.Actor{Team: ct, Member: cm, Session: c.String("session")}, f, emit); err != nil && f.Follow {
			return fmt.Errorf("replay --follow: %w", err)
		} else if err != nil {
			return err
		}
		return nil
	}
	svc := team.New(conn.JS, team.Config{})
	if _, err := svc.Team(ctx, teamID); err != nil {
		return err
	}
	// A message that can not be decoded is shown where it is and counted,
	// never skipped silently.
	bad := 0
	f.OnUndecodable = func(seq uint64, reason string) error {
		bad++
		if asJSON {
			return jl.Write(struct {
				Seq         uint64 `json:"seq"`
				Undecodable string `json:"undecodable"`
			}{seq, reason})
		}
		_, err := fmt.Fprintf(c.App.Writer, "[#%d undecodable: %s]\n", seq, reason)
		return err
	}
	err = svc.ReplayMail(ctx, teamID, f, emit)
	if bad > 0 {
		fmt.Fprintf(c.App.ErrWriter, "teambus: replay: %d undecodable message(s) shown as [#N undecodable: reason]\n", bad)
	}
	return err
}
