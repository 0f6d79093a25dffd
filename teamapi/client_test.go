package teamapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/teamapi"
)

// loopback is a Transport that serves each request with the verb table
// on api, as the team service does: one decode, the actor set by the
// server (always alpha/tm1 here), errors as codes.
type loopback struct {
	api   teamapi.API
	calls []string
}

func (l *loopback) Request(ctx context.Context, subject, verb string, data []byte) (string, []byte, error) {
	l.calls = append(l.calls, subject)
	for _, v := range teamapi.Verbs {
		if v.Name != verb {
			continue
		}
		res, err := v.Serve(ctx, l.api, data, time.Second, func(a *teamapi.Actor) error {
			if a.Member != "" && a.Member != "tm1" {
				return teamapi.Refusedf("the credential of tm1 can act only as tm1, not as %s", a.Member)
			}
			a.Team, a.Member = "alpha", "tm1"
			return a.Validate()
		})
		if err != nil {
			e := teamapi.ErrorOf(err)
			b, _ := json.Marshal(teamapi.ErrorReply{Error: *e})
			return string(e.Code), b, nil
		}
		b, err := json.Marshal(res)
		return "", b, err
	}
	return "", nil, errors.New("no such verb")
}

func (l *loopback) MaxPayload() int64 { return 1 << 20 }

// stub answers send and task; the other verbs are not called here.
type stub struct {
	teamapi.API
	got []teamapi.SendRequest
}

func (s *stub) Send(_ context.Context, r teamapi.SendRequest) (teamapi.SendResult, error) {
	s.got = append(s.got, r)
	return teamapi.SendResult{Seq: uint64(len(s.got)), ID: r.ID}, nil
}

func (s *stub) Task(_ context.Context, r teamapi.TaskRequest) (teamapi.TaskReply, error) {
	if r.ID == "gone" {
		return teamapi.TaskReply{}, teambus.NotFoundf("task %s not found", r.ID)
	}
	return teamapi.TaskReply{}, teamapi.NoTaskf("no task available yet in team %s", r.Team)
}

// TestClient_OverTheVerbTable: a request reaches the API as the same
// type with the server's actor; errors come back typed.
func TestClient_OverTheVerbTable(t *testing.T) {
	api := &stub{}
	tr := &loopback{api: api}
	cl, err := teamapi.NewWith(tr, teamapi.Config{Team: "alpha", Member: "tm1", Session: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := cl.Send(ctx, teamapi.SendRequest{To: "tm2", Body: "hi"})
	if err != nil || res.Seq != 1 {
		t.Fatalf("send = %+v, %v", res, err)
	}
	got := api.got[0]
	if got.Team != "alpha" || got.Member != "tm1" || got.Session != "s1" || got.To != "tm2" || got.Body != "hi" || len(got.ID) != 24 {
		t.Errorf("the API got %+v", got)
	}
	if tr.calls[0] != teamapi.MemberServiceSubject(teamapi.VerbSend) {
		t.Errorf("a member's request went to %s", tr.calls[0])
	}
	if _, err := cl.Send(ctx, teamapi.SendRequest{Actor: teamapi.Actor{Team: "alpha", Member: "tm2"}, Body: "forged"}); !errors.Is(err, teamapi.ErrRefused) || teambus.ExitCode(err) != teambus.ExitPermanent {
		t.Errorf("send as tm2 = %v, want refused (exit 2)", err)
	}
	if _, err := cl.Send(ctx, teamapi.SendRequest{Actor: teamapi.Actor{Team: "beta", Member: "tm1"}, Body: "elsewhere"}); !errors.Is(err, teambus.ErrInvalid) || len(tr.calls) != 2 {
		t.Errorf("send for another team = %v after %d requests, want invalid before any", err, len(tr.calls))
	}
	if _, _, err := cl.Do(ctx, teamapi.TaskRequest{Op: teamapi.TaskNext}); !errors.Is(err, teamapi.ErrNoTask) || teambus.ExitCode(err) != teambus.ExitTransient {
		t.Errorf("task next = %v, want no task (exit 1)", err)
	}
	if _, _, err := cl.Do(ctx, teamapi.TaskRequest{Op: teamapi.TaskClaim, ID: "gone"}); !errors.Is(err, teambus.ErrNotFound) {
		t.Errorf("claim = %v, want not found", err)
	}
	var te *teamapi.Error
	if _, _, err := cl.Do(ctx, teamapi.TaskRequest{Op: teamapi.TaskClaim, ID: "gone"}); !errors.As(err, &te) || te.Code != teamapi.CodeNotFound {
		t.Errorf("claim = %v, want a *teamapi.Error with code not_found", err)
	}
}

// TestClient_Operator: the operator's client of every team sends to the
// data account's subject of the request's team.
func TestClient_Operator(t *testing.T) {
	tr := &loopback{api: &stub{}}
	cl, err := teamapi.NewWith(tr, teamapi.Config{Operator: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Send(context.Background(), teamapi.SendRequest{Actor: teamapi.Actor{Team: "gamma", Member: "tm1"}, Body: "hi"}); err != nil {
		t.Fatal(err)
	}
	if want := teamapi.ServiceSubject("gamma", teamapi.VerbSend); tr.calls[0] != want {
		t.Errorf("subject %s, want %s", tr.calls[0], want)
	}
	if _, err := cl.Send(context.Background(), teamapi.SendRequest{Body: "nobody"}); !errors.Is(err, teambus.ErrInvalid) {
		t.Errorf("send without an actor = %v, want invalid", err)
	}
}
