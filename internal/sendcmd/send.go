package sendcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/internal/cliapp"
	"github.com/teambus/teambus/teamapi"
)

// Command is `teambus send` with action: one message (BODY), or a file
// of them (--from).
func Command(action cli.ActionFunc) *cli.Command {
	return &cli.Command{
		Name:      "send",
		Usage:     "send a message (prints `stored seq N`; delivery is the recipient's ack)",
		ArgsUsage: "BODY (or - to read it from stdin; or --from FILE for many)",
		Flags: cliapp.Flags(cliapp.ConnFlags(), cliapp.MemberFlags(), []cli.Flag{
			&cli.StringFlag{Name: "to", Usage: "recipient: a member, lead or all", Value: teambus.Lead},
			&cli.StringFlag{Name: "type", Usage: "info, question, challenge, resolution, status_check, status, report, shutdown_request, shutdown_response, escalation, system", Value: string(teambus.MsgInfo)},
			&cli.StringFlag{Name: "id", Usage: "idempotency key: the same sender and id store one message within the dedupe window (default: random)"},
			&cli.StringFlag{Name: "data", Usage: "JSON data attached to the message"},
			FromFlag(),
			cliapp.JSONFlag(),
		}),
		Action: action,
	}
}

// FromFlag is `send --from FILE`.
func FromFlag() cli.Flag {
	return &cli.StringFlag{Name: "from", Usage: "send the messages of this JSON Lines `FILE` (- for stdin), one {\"to\",\"body\",\"type\",\"id\",\"data\"} a line, in atomic batches; checked whole before anything is sent; a line without id gets one from its number and text, so sending the file again stores each message once"}
}

// MaxStdinBody is the most `send -` reads from stdin: far more than any
// bus carries in one message.
const MaxStdinBody = 64 << 20

// Request is the message of `send BODY`: its body (read from stdin for
// -), type, data and id, each checked. An empty body is refused here,
// before anything connects; the size is checked once the connection says
// what a request carries. Without --id the id is made here, so a failure
// can name it: a retry with it stores the message once.
func Request(c *cli.Context) (teamapi.SendRequest, error) {
	body := c.Args().First()
	if body == "-" {
		b, err := io.ReadAll(io.LimitReader(c.App.Reader, MaxStdinBody+1))
		if err != nil {
			return teamapi.SendRequest{}, fmt.Errorf("read body from stdin: %w", err)
		}
		if len(b) > MaxStdinBody {
			return teamapi.SendRequest{}, teambus.Invalidf("message body on stdin is more than %d bytes: nothing sent; put large content in a file and send its path", MaxStdinBody)
		}
		body = string(b)
	}
	if err := teambus.ValidateBody(body); err != nil {
		return teamapi.SendRequest{}, err
	}
	typ, err := teambus.ParseMessageType(c.String("type"))
	if err != nil {
		return teamapi.SendRequest{}, err
	}
	req := teamapi.SendRequest{To: c.String("to"), Type: typ, ID: c.String("id"), Body: body}
	if d := c.String("data"); d != "" {
		if err := teambus.ValidateData([]byte(d)); err != nil {
			return teamapi.SendRequest{}, err
		}
		req.Data = json.RawMessage(d)
	}
	if req.ID != "" {
		if err := teambus.ValidateMessageID(req.ID); err != nil {
			return teamapi.SendRequest{}, err
		}
	} else {
		req.ID = teamapi.NewMessageID()
	}
	return req, nil
}

// Send sends req through cl and prints what was stored (`stored seq N`,
// or the JSON of it with --json). A transient failure names the id to
// retry with.
func Send(ctx context.Context, c *cli.Context, cl *teamapi.Client, req teamapi.SendRequest) error {
	res, err := cl.Send(ctx, req)
	if err != nil && teambus.ExitCode(err) == teambus.ExitTransient {
		return fmt.Errorf("%w (retry with --id %s: it stores the message once)", err, req.ID)
	}
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return cliapp.PrintJSON(c.App.Writer, res)
	}
	line := fmt.Sprintf("stored seq %d", res.Seq)
	if res.Duplicate {
		line += " (duplicate)"
	}
	if res.Held {
		line = "held: you are in zombie mode; it gets a seq when it is released, before any later mail of yours"
		if res.Duplicate {
			line += " (duplicate)"
		}
	}
	fmt.Fprintln(c.App.Writer, line)
	return nil
}
