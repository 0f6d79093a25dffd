package mcpserver_test

import (
	"context"
	"slices"
	"testing"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/agent/mcpserver"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// TestClientAPI_NoJetStream: the client fixture really runs on a
// member credential, which reaches no JetStream: everything the tools do
// goes through the team service.
func TestClientAPI_NoJetStream(t *testing.T) {
	f := newClientFixture(t, 1)
	c := f.memberConn("tm1")
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := c.JS.AccountInfo(ctx)
		errc <- err
	}()
	// The bus refuses the JetStream request (a permission violation) or
	// answers with an error; it never answers with the account.
	select {
	case <-c.DeniedC():
	case err := <-errc:
		if err == nil {
			t.Fatal("a member credential reached JetStream")
		}
	}
	var who mcpserver.WhoamiOut
	ok(t, f.client(member("tm1")), "whoami", nil, &who)
	if !who.Bound || who.Member != "tm1" || who.Epoch != 1 {
		t.Fatalf("whoami over the service: %+v", who)
	}
}

// TestClientAPI_OtherIdentity: a credential acts only as its member of
// its team; an identity that contradicts it is refused, nothing sent.
func TestClientAPI_OtherIdentity(t *testing.T) {
	f := newClientFixture(t, 2)
	s := f.server(mcpserver.Config{API: f.memberAPI("tm1"), Resolve: mcpserver.StaticIdentity(member("tm2"))})
	cs := connect(t, s, nil, nil)
	fails(t, cs, "send", map[string]any{"to": "lead", "body": "as tm2"}, "[permanent]", "credential")
	s = f.server(mcpserver.Config{API: f.memberAPI("tm1"), Resolve: mcpserver.StaticIdentity(mcpserver.Identity{Team: "beta", Member: "tm1"})})
	fails(t, connect(t, s, nil, nil), "team_status", nil, "[permanent]", "team alpha")
	if got := f.unacked("lead"); len(got) != 0 {
		t.Fatalf("a refused send stored mail: %v", got)
	}
}

// TestClientAPI_Lead: the lead on its credential reassigns, adds tasks,
// probes and resumes through the service.
func TestClientAPI_Lead(t *testing.T) {
	f := newClientFixture(t, 2)
	if _, err := f.svc.AddTask(testCtx(t), "alpha", team.TaskSpec{ID: "t1"}); err != nil {
		t.Fatal(err)
	}
	lead := f.client(mcpserver.Identity{Team: "alpha", Member: teambus.Lead, Session: "s-lead"})
	names, _ := toolNames(t, lead)
	for _, lt := range mcpserver.LeadTools {
		if !slices.Contains(names, lt) {
			t.Fatalf("lead tool %s not listed: %v", lt, names)
		}
	}
	var tr mcpserver.TaskResult
	ok(t, lead, "task_reassign", map[string]any{"id": "t1", "to": "tm2"}, &tr)
	if tr.Task.AssignedTo != "tm2" {
		t.Fatalf("task_reassign: %+v", tr.Task)
	}
	// The lead's credential adds tasks, probes and resumes its team
	// through the service.
	ok(t, lead, "task_add", map[string]any{"id": "t2", "description": "more"}, &tr)
	if tr.Task.ID != "t2" {
		t.Fatalf("task_add: %+v", tr.Task)
	}
	if _, _, err := f.svc.Store().Task(testCtx(t), "alpha", "t2"); err != nil {
		t.Fatalf("task_add through the service: %v", err)
	}
	var rep mcpserver.ReportOut
	ok(t, lead, "team_probe", nil, &rep)
	// As on the team state: a team resume does not attach a first lead.
	fails(t, lead, "team_resume", map[string]any{"force": true}, "[permanent]", "never had a lead")
	// The lead's replay through the service is the team's whole mailbox;
	// a teammate's is its own mail.
	ok(t, f.client(member("tm1")), "send", map[string]any{"to": "lead", "body": "to the lead"}, nil)
	ok(t, f.client(member("tm1")), "send", map[string]any{"to": "tm2", "body": "between teammates"}, nil)
	var rp mcpserver.MessagesOut
	ok(t, lead, "replay", nil, &rp)
	if len(rp.Messages) != 2 || rp.Messages[0].Body != "to the lead" || rp.Messages[1].Body != "between teammates" {
		t.Fatalf("lead replay over the service: %+v", rp)
	}
}

// TestClientAPI_Direct: on the operator's connection with Direct the
// lead calls the service does not offer run on the team state.
func TestClientAPI_Direct(t *testing.T) {
	f := newClientFixture(t, 1)
	s := f.server(mcpserver.Config{API: f.operatorAPI(), Direct: f.svc, Resolve: mcpserver.StaticIdentity(mcpserver.Identity{Team: "alpha", Member: teambus.Lead, Session: "s-lead"})})
	lead := connect(t, s, nil, nil)
	toolNames(t, lead) // binds as the lead: the lead tools appear
	var tr mcpserver.TaskResult
	ok(t, lead, "task_add", map[string]any{"id": "t1", "description": "first"}, &tr)
	if tr.Task.ID != "t1" {
		t.Fatalf("task_add: %+v", tr.Task)
	}
	var rep mcpserver.ReportOut
	ok(t, lead, "team_probe", nil, &rep)
	if rep.Tasks["available"] != 1 {
		t.Fatalf("team_probe: %+v", rep)
	}
	// Member calls of the operator go through the service as well.
	var sent mcpserver.SendOut
	ok(t, lead, "send", map[string]any{"to": "tm1", "body": "hi"}, &sent)
	if got := f.unacked("tm1"); !slices.Equal(got, []uint64{sent.Seq}) {
		t.Fatalf("tm1 unacked %v, want [%d]", got, sent.Seq)
	}
}

// operatorAPI is the member API over the team service with the
// operator's token, for every team.
func (f *fixture) operatorAPI() teamapi.API {
	f.t.Helper()
	cl, err := teamapi.New(f.conn.NC, teamapi.Config{Operator: true})
	if err != nil {
		f.t.Fatal(err)
	}
	return cl
}
