package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// sendAction is the action of `send`: one message (BODY), or a file of
// them (--from).
func sendAction(c *cli.Context) error {
	if c.IsSet("from") {
		return sendFrom(c)
	}
	return actorAction(1, send)(c)
}

// sendLine is one message of `send --from --json`: what the service
// stored, and the line it came from.
type sendLine struct {
	mailbox.SendResult
	Line int `json:"line"`
}

// sendFrom is `teambus send --from FILE`: every line is checked (here,
// then by the team service, all of them before the first is stored), then
// the messages are sent in order, a request of at most team.MaxSendBatch
// at a time, each stored in atomic batches. Sent again, the same file
// stores nothing twice: the messages come back duplicate.
func sendFrom(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageError(c, "--from takes the messages from the file: no BODY argument")
	}
	a, err := actor(c)
	if err != nil {
		return err
	}
	path := c.String("from")
	var msgs []teamapi.BatchMessage
	if err := readFrom(c, "message", []string{"to", "type", "id", "data"}, func(r io.Reader) (err error) {
		msgs, err = team.ParseSendBatch(r)
		return err
	}); err != nil {
		return err
	}
	return withMember(c, a, func(s *session, cl *teamapi.Client) error {
		// A message too large for any request is refused before the
		// first request, as `send` refuses it.
		if err := cl.CheckFit(s.ctx, msgs); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		chunks, err := sendChunks(msgs, cl.MaxPayload())
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		// The whole send may outlast --timeout: it bounds each request.
		call := func(chunk []teamapi.BatchMessage, check bool) ([]mailbox.SendResult, error) {
			ctx, cancel, err := withTimeout(c)
			if err != nil {
				return nil, err
			}
			defer cancel()
			return cl.SendMessages(ctx, chunk, check)
		}
		if len(chunks) > 1 {
			for _, chunk := range chunks {
				if _, err := call(chunk, true); err != nil {
					return fmt.Errorf("%s: %w", path, err)
				}
			}
		}
		var progress func(done int)
		if tty, ok := c.App.ErrWriter.(*os.File); ok && isTerminal(tty) && len(chunks) > 1 {
			progress = func(done int) {
				fmt.Fprintf(tty, "\rsending messages: %d/%d", done, len(msgs))
				if done == len(msgs) {
					fmt.Fprintln(tty)
				}
			}
		}
		var res []mailbox.SendResult
		for _, chunk := range chunks {
			got, err := call(chunk, false)
			res = append(res, got...)
			if errors.Is(err, bus.ErrNoLeader) && len(res) == 0 {
				return fmt.Errorf("%s: %w: send the file again (what is stored comes back duplicate)", path, err)
			}
			if err != nil && len(res) == 0 {
				return fmt.Errorf("%s: %w", path, err)
			}
			if err != nil {
				return fmt.Errorf("%s: %d of %d messages stored, then: %w (send the file again: what is stored comes back duplicate)", path, len(res), len(msgs), err)
			}
			if progress != nil {
				progress(len(res))
			}
		}
		return printSendFrom(c, msgs, res)
	})
}

// sendChunks splits msgs into requests of at most team.MaxSendBatch
// messages that fit in maxPayload bytes.
func sendChunks(msgs []teamapi.BatchMessage, maxPayload int64) ([][]teamapi.BatchMessage, error) {
	budget := maxPayload - teamapi.BatchEnvelope
	var (
		out   [][]teamapi.BatchMessage
		start int
		size  int64
	)
	for i, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("line %d: encode: %w", m.Line, err)
		}
		n := int64(len(b)) + 1
		if n > budget {
			return nil, teambus.Invalidf("line %d: the message is %d bytes encoded, more than a request of this bus carries (%d): put large content in a file and send its path", m.Line, n, budget)
		}
		if i > start && (i-start == team.MaxSendBatch || size+n > budget) {
			out = append(out, msgs[start:i])
			start, size = i, 0
		}
		size += n
	}
	return append(out, msgs[start:]), nil
}

// printSendFrom prints the results of send --from: one line of totals, or
// with --json one line per message.
func printSendFrom(c *cli.Context, msgs []teamapi.BatchMessage, res []mailbox.SendResult) error {
	if c.Bool("json") {
		out := newJSONLines(c.App.Writer)
		for i, r := range res {
			if err := out.Write(sendLine{SendResult: r, Line: msgs[i].Line}); err != nil {
				return err
			}
		}
		return nil
	}
	var dup, held int
	var first, last uint64
	for _, r := range res {
		if r.Duplicate {
			dup++
		}
		if r.Held {
			held++
			continue
		}
		if first == 0 || r.Seq < first {
			first = r.Seq
		}
		last = max(last, r.Seq)
	}
	line := fmt.Sprintf("stored %d messages (%d duplicate)", len(res), dup)
	if first > 0 {
		line += fmt.Sprintf(", seq %d..%d", first, last)
	}
	if held > 0 {
		line += fmt.Sprintf("; %d held: you are in zombie mode; they get a seq when they are released, before any later mail of yours", held)
	}
	fmt.Fprintln(c.App.Writer, line)
	return nil
}
