package node

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go/micro"

	"github.com/teambus/teambus"
)

func TestIdentify(t *testing.T) {
	t.Parallel()
	info := func(v string) micro.Headers { return micro.Headers{RequestInfoHeader: {v}} }
	tests := []struct {
		name    string
		subject string
		h       micro.Headers
		want    caller
		ok      bool
	}{
		{"operator in the data account", "tbsvc.alpha.send", nil, caller{team: "alpha", operator: true}, true},
		{"member through its import", "tbsvc.alpha.send", info(`{"acc":"TBM_alpha","user":"alpha.tm1"}`), caller{team: "alpha", member: "tm1"}, true},
		{"lead credential", "tbsvc.alpha.send", info(`{"acc":"TBM_alpha","user":"alpha.lead"}`), caller{team: "alpha", member: teambus.Lead}, true},
		{"member account of another team", "tbsvc.alpha.send", info(`{"acc":"TBM_beta","user":"alpha.tm1"}`), caller{}, false},
		{"user of another team", "tbsvc.alpha.send", info(`{"acc":"TBM_alpha","user":"beta.tm1"}`), caller{}, false},
		{"the data account with a header", "tbsvc.alpha.send", info(`{"acc":"$G","user":"alpha.tm1"}`), caller{}, false},
		{"user without a member", "tbsvc.alpha.send", info(`{"acc":"TBM_alpha","user":"alpha"}`), caller{}, false},
		{"user with a wildcard", "tbsvc.alpha.send", info(`{"acc":"TBM_alpha","user":"alpha.*"}`), caller{}, false},
		{"user that is the broadcast", "tbsvc.alpha.send", info(`{"acc":"TBM_alpha","user":"alpha.all"}`), caller{}, false},
		{"two request infos", "tbsvc.alpha.send", micro.Headers{RequestInfoHeader: {`{"acc":"TBM_alpha","user":"alpha.tm1"}`, `{"acc":"TBM_alpha","user":"alpha.tm2"}`}}, caller{}, false},
		{"unreadable request info", "tbsvc.alpha.send", info(`{`), caller{}, false},
		{"other casing is the caller's own header", "tbsvc.alpha.send", micro.Headers{"nats-request-info": {`{"acc":"TBM_alpha","user":"alpha.tm1"}`}}, caller{team: "alpha", operator: true}, true},
		{"subject with a bad team", "tbsvc.al*ha.send", nil, caller{}, false},
		{"not a service subject", "tb.alpha.send", nil, caller{}, false},
		{"too many tokens", "tbsvc.alpha.x.send", nil, caller{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := identify(tt.subject, tt.h)
			if (err == nil) != tt.ok {
				t.Fatalf("identify = %+v, %v; want ok %v", got, err, tt.ok)
			}
			if err != nil && !errors.Is(err, teambus.ErrInvalid) {
				t.Errorf("error %v is not ErrInvalid", err)
			}
			if got != tt.want {
				t.Errorf("identify = %+v, want %+v", got, tt.want)
			}
		})
	}
}
