package teambus_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/teambus/teambus"
)

func TestPolicy_Respawn(t *testing.T) {
	if got := teambus.DefaultPolicy().RespawnMode(); got != teambus.RespawnLead {
		t.Errorf("default respawn %q, want lead", got)
	}
	for in, want := range map[string]teambus.RespawnPolicy{"auto": teambus.RespawnAuto, "off": teambus.RespawnOff, "lead": "", " auto ": teambus.RespawnAuto} {
		got, err := teambus.ParseRespawn(in)
		if err != nil || got != want {
			t.Errorf("ParseRespawn(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := teambus.ParseRespawn("always"); !errors.Is(err, teambus.ErrInvalid) {
		t.Errorf("ParseRespawn(always) = %v, want ErrInvalid", err)
	}
	p := teambus.DefaultPolicy()
	p.Respawn = teambus.RespawnAuto
	b, _ := json.Marshal(p)
	var back teambus.Policy
	if err := json.Unmarshal(b, &back); err != nil || back != p {
		t.Errorf("round trip %s = %+v, %v", b, back, err)
	}
	if !strings.Contains(p.String(), "respawn=auto") {
		t.Errorf("String() = %q", p.String())
	}
	if err := json.Unmarshal([]byte(`{"respawn":"lead"}`), &back); err != nil || back != teambus.DefaultPolicy() {
		t.Errorf(`{"respawn":"lead"} = %+v, %v`, back, err)
	}
	if err := json.Unmarshal([]byte(`{"respawn":"sometimes"}`), &back); err != nil || !errors.Is(back.Validate(), teambus.ErrInvalid) {
		t.Errorf(`{"respawn":"sometimes"}: %v, Validate %v`, err, back.Validate())
	}
	if b, _ := json.Marshal(teambus.DefaultPolicy()); strings.Contains(string(b), "respawn") {
		t.Errorf("default policy stores respawn: %s", b)
	}
}
