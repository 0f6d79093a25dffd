package initclaude

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzMerge: any input either is refused with ErrNotJSON or gives valid JSON
// that is a fixed point of Merge, keeps every other top-level member's bytes,
// and loses all teambus handlers on RemoveHooks.
func FuzzMerge(f *testing.F) {
	files, _ := filepath.Glob("testdata/merge/*.json")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b, uint8(0))
			f.Add(b, uint8(7))
		}
	}
	for _, s := range []string{``, `{}`, `null`, `[]`, `{"hooks":null}`, `{"hooks":{"Stop":null}}`, `{"hooks":{"Stop":[null,1,"x",{"hooks":null}]}}`,
		`{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"teambus","args":["hook","Stop"]},{"type":"command","command":"x"}]}]}}`,
		`{"a":1,"a":2}`, `{"\u0068ooks":{}}`, `{"hooks":{"Stop":[]},"hooks2":[]}`, "{\"k\":\"\u2028\"}", `{"a":{}} `} {
		f.Add([]byte(s), uint8(1))
	}
	f.Fuzz(func(t *testing.T, data []byte, flags uint8) {
		o := Options{Bin: testBin, Lead: flags&1 != 0, ShellForm: flags&2 != 0, PostToolUse: flags&4 != 0, Autonomous: flags&8 != 0}
		if flags&16 != 0 {
			o.Team, o.Member = "alpha", "tm1"
		}
		if flags&32 != 0 {
			o.Wake = WakeOff
		}
		out, err := Merge(data, Handlers(o))
		if err != nil {
			if !errors.Is(err, ErrNotJSON) {
				t.Fatalf("Merge error %v is not ErrNotJSON", err)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("Merge gave invalid JSON:\n%s", out)
		}
		again, err := Merge(out, Handlers(o))
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("Merge not idempotent (%v):\n%s", err, Diff("out", out, again))
		}
		before, after := fuzzTop(data), fuzzTop(out)
		if len(before) != len(after) {
			t.Fatalf("top-level members %d before, %d after", len(before), len(after))
		}
		for i := range before {
			if !bytes.Equal(before[i].value, after[i].value) || before[i].key != after[i].key {
				t.Fatalf("member %q changed: %s -> %s", before[i].key, before[i].value, after[i].value)
			}
		}
		rm, err := RemoveHooks(out, false)
		if err != nil || !json.Valid(rm) {
			t.Fatalf("RemoveHooks: %v\n%s", err, rm)
		}
		if left, _ := FindInstalled(rm); len(left) > 0 {
			t.Fatalf("RemoveHooks left %d teambus handlers", len(left))
		}
		if rm2, err := RemoveHooks(rm, false); err != nil || !json.Valid(rm2) {
			t.Fatalf("second RemoveHooks: %v", err)
		}
	})
}

// fuzzTop is the top-level members of data other than hooks.
func fuzzTop(data []byte) []member {
	ms, _ := parseDocument(data)
	var out []member
	for _, m := range ms {
		if m.key != "hooks" {
			out = append(out, m)
		}
	}
	return out
}
