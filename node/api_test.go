package node_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/teamapi"
)

// TestAPI_LocalAndRemoteAlike: the member API answers alike on the team
// state (team.Service.API) and over the bus (teamapi.Client through the
// team service): the same request types, the same replies, the same
// typed errors.
func TestAPI_LocalAndRemoteAlike(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	tm1 := teamapi.Actor{Team: "alpha", Member: "tm1"}
	for name, api := range map[string]teamapi.API{"local": e.admin.API(), "remote": e.tm1} {
		res, err := api.Send(ctx, teamapi.SendRequest{Actor: tm1, To: "tm2", ID: "alike-" + name, Body: "hello from " + name})
		if err != nil || res.Seq == 0 {
			t.Fatalf("%s: send = %+v, %v", name, res, err)
		}
		again, err := api.Send(ctx, teamapi.SendRequest{Actor: tm1, To: "tm2", ID: "alike-" + name, Body: "hello from " + name})
		if err != nil || !again.Duplicate || again.Seq != res.Seq {
			t.Fatalf("%s: send again = %+v, %v, want the duplicate of %d", name, again, err, res.Seq)
		}
		if _, err := api.Send(ctx, teamapi.SendRequest{Actor: tm1, To: "tm2", Type: teambus.MsgShutdownRequest, Body: "stop"}); !errors.Is(err, teambus.ErrInvalid) {
			t.Errorf("%s: shutdown_request from a teammate = %v, want invalid", name, err)
		}
		page, err := api.Replay(ctx, teamapi.ReplayRequest{Actor: tm1})
		if err != nil || len(page.Messages) == 0 {
			t.Fatalf("%s: replay = %+v, %v", name, page, err)
		}
		v, err := api.Show(ctx, teamapi.ShowRequest{Actor: tm1})
		if err != nil {
			t.Fatalf("%s: show: %v", name, err)
		}
		b, _ := json.Marshal(v)
		var view struct {
			Team struct {
				ID string `json:"id"`
			} `json:"team"`
		}
		if err := json.Unmarshal(b, &view); err != nil || view.Team.ID != "alpha" {
			t.Errorf("%s: show = %s (%v)", name, b, err)
		}
		if _, err := api.Task(ctx, teamapi.TaskRequest{Actor: tm1, Op: teamapi.TaskClaim, ID: "nope"}); !errors.Is(err, teambus.ErrNotFound) {
			t.Errorf("%s: claim of no task = %v, want not found", name, err)
		}
		var te *teamapi.Error
		if _, err := api.Brief(ctx, teamapi.BriefRequest{Actor: tm1, Of: "tm2"}); !errors.Is(err, teamapi.ErrRefused) || !errors.As(err, &te) || te.Code != teamapi.CodeRefused {
			t.Errorf("%s: brief of another = %v, want refused", name, err)
		}
	}
}
