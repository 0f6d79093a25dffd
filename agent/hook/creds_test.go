package hook

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/node/credstore"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// credsRig is a rig whose node runs the team service and whose hooks
// hold only the credential of member (no node token, no node directory).
func credsRig(t *testing.T, member string) *rig {
	t.Helper()
	nd := nodetest.NewServer(t)
	conn := nodetest.Connect(t, nd)
	r := &rig{t: t, node: nd, svc: team.New(conn.JS, team.Config{}), state: t.TempDir(), session: "91a14418-95d4-40e3-8290-20dd80416f47"}
	ctx := context.Background()
	if _, err := r.svc.CreateTeam(ctx, "alpha", "", []team.MemberSpec{{ID: "tm1"}, {ID: "tm2"}}, teambus.DefaultPolicy()); err != nil {
		t.Fatal(err)
	}
	if _, err := r.svc.AddTask(ctx, "alpha", team.TaskSpec{ID: "t1", Description: "build the parser"}); err != nil {
		t.Fatal(err)
	}
	cr, err := credstore.IssueCreds(ctx, conn, "alpha", member, []string{nd.URL()})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), member+".creds")
	if err := bus.WriteCreds(path, cr); err != nil {
		t.Fatal(err)
	}
	r.claude = r.agent()
	r.env = map[string]string{"CLAUDE_PID": strconv.Itoa(r.claude.Process.Pid), "TEAMBUS_TEAM": "alpha", "TEAMBUS_MEMBER": member, "TEAMBUS_NO_SIDECAR": "1"}
	r.creds = path
	return r
}

// The hooks of a session that holds only its member credential bind,
// brief, deliver mail and ack it after the write, record conditions and
// checkpoints, through the team service.
func TestHooks_MemberCredential(t *testing.T) {
	r := credsRig(t, "tm1")
	seq := r.send("tm2", "tm1", "before the session")
	ctx := r.bind()
	if !strings.Contains(ctx, "before the session") {
		t.Fatalf("SessionStart did not deliver the mail:\n%s\nlog:\n%s", ctx, r.hookLog())
	}
	if u := r.unread("tm1"); len(u) != 0 {
		t.Fatalf("mail %d not acked after SessionStart: unread %v", seq, u)
	}
	b := r.binding()
	m, err := r.svc.Member(context.Background(), "alpha", "tm1")
	if err != nil || m.Session != b.Session || m.Epoch != b.Epoch {
		t.Fatalf("member record %+v, binding %+v, err %v", m, b, err)
	}

	r.send("tm2", "tm1", "during the session")
	res := r.hook("PostToolBatch", "PostToolBatch.real-2.1.330.json", nil)
	if c := res.context(t, "PostToolBatch"); !strings.Contains(c, "during the session") {
		t.Fatalf("PostToolBatch: code %d context %q log:\n%s", res.code, c, r.hookLog())
	}
	if u := r.unread("tm1"); len(u) != 0 {
		t.Fatalf("mail not acked after PostToolBatch: unread %v", u)
	}

	res = r.hook("Notification", "Stop.real-2.1.330.json", map[string]any{"hook_event_name": "Notification", "notification_type": "permission_prompt", "message": "Claude needs your permission"})
	if m, _ := r.svc.Member(context.Background(), "alpha", "tm1"); res.code != 0 || m.Condition != "approval" {
		t.Fatalf("Notification: code %d condition %q log:\n%s", res.code, m.Condition, r.hookLog())
	}
	r.hook("PostToolBatch", "PostToolBatch.real-2.1.330.json", nil)
	if m, _ := r.svc.Member(context.Background(), "alpha", "tm1"); m.Condition != "" {
		t.Fatalf("condition not cleared by the next tool batch: %q", m.Condition)
	}
}

// A member credential of another member does not bind: the hook says so
// and nothing changes.
func TestHooks_MemberCredentialOfAnother(t *testing.T) {
	r := credsRig(t, "tm2")
	r.env["TEAMBUS_MEMBER"] = "tm1"
	res := r.hook("SessionStart", "SessionStart.real-2.1.330.json", nil)
	if c := res.context(t, "SessionStart"); !strings.Contains(c, "not bound") || !strings.Contains(c, "credential") {
		t.Fatalf("SessionStart with tm2's credential as tm1: %q", c)
	}
	if m, _ := r.svc.Member(context.Background(), "alpha", "tm1"); m.Session != "" {
		t.Fatalf("tm1 registered a session with tm2's credential: %+v", m)
	}
}

// The lead's session holding only the lead credential attaches as the
// lead through the team service (resume), and its rebrief probes.
func TestHooks_LeadCredential(t *testing.T) {
	r := credsRig(t, teambus.Lead)
	r.env["TEAMBUS_MEMBER"] = teambus.Lead
	r.send("tm1", teambus.Lead, "report from tm1")
	res := r.hook("SessionStart", "SessionStart.real-2.1.330.json", nil)
	c := res.context(t, "SessionStart")
	if !strings.Contains(c, "this session is the lead") || !strings.Contains(c, "report from tm1") {
		t.Fatalf("SessionStart as the lead: code %d context:\n%s\nlog:\n%s", res.code, c, r.hookLog())
	}
	tm, err := r.svc.Team(context.Background(), "alpha")
	if err != nil || tm.LeadSession != r.binding().Session {
		t.Fatalf("team %+v err %v: the lead session is not the hook's", tm, err)
	}
	res = r.hook("SessionStart", "SessionStart.real-2.1.330.json", map[string]any{"source": "resume"})
	if c := res.context(t, "SessionStart"); !strings.Contains(c, "this session is the lead") {
		t.Fatalf("rebrief of the lead: %q\nlog:\n%s", c, r.hookLog())
	}
}

// A member's credential can not attach as the lead: resume and probe are
// refused by the service.
func TestHooks_MemberCredentialIsNotLead(t *testing.T) {
	r := credsRig(t, "tm1")
	conn, err := bus.Connect(context.Background(), bus.ConnectConfig{Creds: r.creds})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	api, err := apiOf(conn, "alpha", "tm1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = api.Resume(context.Background(), teamapi.ResumeRequest{Actor: teamapi.Actor{Team: "alpha", Member: teambus.Lead, Session: "s1"}, Force: true})
	if !errors.Is(err, teamapi.ErrRefused) {
		t.Fatalf("resume as the lead with tm1's credential: %v", err)
	}
	_, err = api.Probe(context.Background(), teamapi.ProbeRequest{Actor: teamapi.Actor{Team: "alpha", Member: "tm1"}})
	if !errors.Is(err, teamapi.ErrRefused) {
		t.Fatalf("probe with tm1's credential: %v", err)
	}
	_, err = api.Event(context.Background(), teamapi.EventRequest{Actor: teamapi.Actor{Team: "alpha", Member: "tm1"}, Type: "member.crashed", Data: []byte(`{}`)})
	if !errors.Is(err, teamapi.ErrRefused) {
		t.Fatalf("a member logging member.crashed: %v", err)
	}
	if tm, _ := r.svc.Team(context.Background(), "alpha"); tm.LeadSession != "" {
		t.Fatalf("the team has lead session %q", tm.LeadSession)
	}
}
