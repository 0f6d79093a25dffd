package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/teamapi"
)

// TestSecurity_MemberCredsCLI issues a member credential with the CLI and
// runs the member's commands with only that file: everything it does
// works, and the other team is out of reach.
func TestSecurity_MemberCredsCLI(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.createTeam("alpha", teambus.DefaultPolicy(), "tm1", "tm2")
	e.createTeam("beta", teambus.DefaultPolicy(), "tm1")
	e.addTask("alpha", "t1")
	e.addTask("alpha", "t2")
	e.addTask("alpha", "t3")
	e.addTask("beta", "t1")
	if _, err := e.svc.Send(ctx, teamapi.SendRequest{Actor: actor("beta", teambus.Lead, ""), To: "tm1", Body: "beta secret"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Send(ctx, teamapi.SendRequest{Actor: actor("alpha", teambus.Lead, ""), To: "tm1", Body: "alpha work"}); err != nil {
		t.Fatal(err)
	}

	file := filepath.Join(t.TempDir(), "tm1.creds")
	out, errOut, code := e.run("team", "creds", "alpha", "--member", "tm1", "--out", file)
	if code != 0 || !strings.Contains(out, file) {
		t.Fatalf("team creds: exit %d: %s %s", code, out, errOut)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	b, _ := os.ReadFile(file)
	if strings.Contains(string(b), e.node.Token()) {
		t.Fatal("the member credential holds the node token")
	}

	// member runs a command with only the credential: no --team, no
	// --member, and no access to the node token (a --dir without one).
	noDir := t.TempDir()
	member := func(args ...string) (string, string, int) {
		t.Helper()
		return runCLI(t, append(args, "--creds", file, "--dir", noDir, "--timeout", "5s")...)
	}
	ok := func(args ...string) string {
		t.Helper()
		out, errOut, code := member(args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s %s", args, code, out, errOut)
		}
		return out
	}
	ok("send", "--to", "lead", "--id", "k1", "hello lead")
	ok("send", "--to", "tm2", "hello tm2")
	ok("send", "--to", "all", "hello all")
	var msg struct {
		Seq  uint64 `json:"seq"`
		Body string `json:"body"`
	}
	line := strings.TrimSpace(ok("inbox", "--json"))
	if err := json.Unmarshal([]byte(line), &msg); err != nil || msg.Body != "alpha work" {
		t.Fatalf("inbox = %q (%v), want alpha's mail only", line, err)
	}
	ok("ack", jsonSeq(msg.Seq))
	if got := strings.TrimSpace(ok("inbox", "--json")); got != "" {
		t.Errorf("inbox after ack = %q", got)
	}
	// inbox --ack leases the mail, prints it, then acks it by token.
	if _, err := e.svc.Send(ctx, teamapi.SendRequest{Actor: actor("alpha", teambus.Lead, ""), To: "tm1", Body: "more work"}); err != nil {
		t.Fatal(err)
	}
	if got := ok("inbox", "--ack", "--wait", "2s"); !strings.Contains(got, "more work") {
		t.Errorf("inbox --ack = %q, want the new mail", got)
	}
	if got := strings.TrimSpace(ok("inbox", "--json")); got != "" {
		t.Errorf("inbox after inbox --ack = %q", got)
	}
	// A member may not ask a teammate to shut down: only the lead may.
	if _, errOut, code := member("send", "--to", "tm2", "--type", "shutdown_request", "stop"); code != teambus.ExitPermanent || !strings.Contains(errOut, "only the lead") {
		t.Errorf("shutdown_request from a member: exit %d %q", code, errOut)
	}
	ok("task", "claim", "t1")
	ok("checkpoint", "--done", "read the code", "--remaining", "write it")
	ok("task", "complete", "t1")
	ok("task", "claim", "t2")
	ok("task", "block", "t2", "--reason", "waiting for review")
	ok("task", "release", "t2")
	ok("task", "claim", "t3")
	ok("task", "fail", "t3", "--reason", "flaky")
	ok("task", "next")
	ok("task", "list")
	ok("team", "show", "alpha")
	if tk := e.task("alpha", "t1"); tk.Status != teambus.TaskComplete || tk.AssignedTo != "tm1" {
		t.Errorf("alpha t1 = %s by %s, want complete by tm1", tk.Status, tk.AssignedTo)
	}

	// The other team, and other members, are out of reach.
	denied := []struct {
		name string
		args []string
		want string
	}{
		{"other team's inbox", []string{"inbox", "--team", "beta"}, "only"},
		{"another member", []string{"inbox", "--member", "tm2"}, "only"},
		{"other team's state", []string{"team", "show", "beta"}, "only"},
		{"other team's tasks", []string{"task", "list", "--team", "beta"}, "only"},
		{"list teams", []string{"team", "list"}, "needs the operator's credential"},
		{"the team's mailbox as it grows", []string{"replay", "--team", "alpha", "--follow"}, "needs the operator's credential"},
		{"create a team", []string{"team", "create", "gamma", "--member", "x1"}, "needs the operator's credential"},
		{"issue credentials", []string{"team", "creds", "alpha", "--member", "tm2"}, "credential"},
	}
	for _, tt := range denied {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := member(tt.args...)
			if code != teambus.ExitPermanent || !strings.Contains(errOut, tt.want) {
				t.Errorf("%v: exit %d, %q %q; want exit %d saying %q", tt.args, code, out, errOut, teambus.ExitPermanent, tt.want)
			}
		})
	}
	// A wrong password is refused at connect.
	var cr bus.Creds
	if err := json.Unmarshal(b, &cr); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runCLI(t, "inbox", "--server", e.node.URL(), "--user", cr.User, "--password", "wrong", "--team", "alpha", "--member", "tm1", "--timeout", "3s"); code != teambus.ExitPermanent || !strings.Contains(errOut, "authorization") {
		t.Errorf("wrong password: exit %d %q", code, errOut)
	}
	// --user and --password of the credential work like the file (the
	// inbox prefix follows from the user name).
	if out, errOut, code := runCLI(t, "send", "--server", e.node.URL(), "--user", cr.User, "--password", cr.Password, "--team", "alpha", "--member", "tm1", "by password", "--timeout", "5s"); code != 0 {
		t.Errorf("user and password: exit %d %s %s", code, out, errOut)
	}
	// Beta's mail is untouched and nothing of alpha's tm1 reached it.
	msgs, err := e.svc.Inbox(ctx, actor("beta", "tm1", ""), mailbox.InboxOptions{})
	if err != nil || len(msgs) != 1 || msgs[0].Body != "beta secret" {
		t.Errorf("beta tm1 inbox = %+v, %v", msgs, err)
	}
	lead, err := e.svc.Inbox(ctx, actor("beta", teambus.Lead, ""), mailbox.InboxOptions{})
	if err != nil || len(lead) != 0 {
		t.Errorf("beta lead inbox = %+v, %v", lead, err)
	}

	// Revoked: the next command is refused.
	if out, errOut, code := e.run("team", "creds", "alpha", "--member", "tm1", "--revoke"); code != 0 {
		t.Fatalf("revoke: exit %d %s %s", code, out, errOut)
	}
	e.waitFor(5*time.Second, "revoked credential refused", func() error {
		if _, _, code := member("inbox"); code == 0 {
			return os.ErrExist
		}
		return nil
	})
}

func jsonSeq(seq uint64) string {
	b, _ := json.Marshal(seq)
	return string(b)
}
