package faults

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/node/credstore"
)

// TestIsolation_LeadCredentialAttacks plays every attack of the member
// suite with alpha's lead credential instead: the lead may change its own
// team, so only what is not alpha's is judged. No other team's stream,
// key, consumer or credential may change, and the attacker may receive
// nothing of beta's.
func TestIsolation_LeadCredentialAttacks(t *testing.T) {
	for _, atk := range isolationAttacks() {
		t.Run(atk.name, func(t *testing.T) {
			w := newIsoWorld(t)
			ctx := isoCtx(t)
			cr, err := credstore.IssueCreds(ctx, w.op, "alpha", teambus.Lead, []string{w.node.URL()})
			if err != nil {
				t.Fatal(err)
			}
			w.creds = cr
			a := w.attacker()
			if atk.subs != nil {
				for _, s := range atk.subs(w) {
					a.subscribe(s)
				}
				_ = a.nc.FlushTimeout(w.pol.Heartbeat)
			}
			w.traffic(ctx, "before", true)
			before := w.snapshot(ctx)
			n := w.names(before)
			// The row's own findings speak of alpha's members: the lead
			// may act on them. Only what follows is judged.
			_ = atk.run(ctx, w, a, n)
			after := w.settle(ctx, a)
			problems := judge(notAlpha(before), notAlpha(after), atk.allow)
			problems = append(problems, leadLeaks(a)...)
			if len(problems) > 0 {
				const show = 12
				total := len(problems)
				if total > show {
					problems = problems[:show]
				}
				t.Errorf("attack %q with the lead's credential reached another team (%d findings):\n  %s", atk.name, total, strings.Join(problems, "\n  "))
			}
		})
	}
}

// notAlpha is the snapshot without alpha's own streams and buckets.
func notAlpha(s worldSnap) worldSnap {
	out := worldSnap{}
	for name, st := range s {
		if !strings.HasSuffix(name, "_alpha") {
			out[name] = st
		}
	}
	return out
}

// leadLeaks is what alpha's lead received of another team, or outside
// its own inbox and its team's mail.
func leadLeaks(a *attacker) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, r := range a.got {
		switch {
		case bytes.Contains(r.data, []byte(secretMark)) && bytes.Contains(r.data, []byte(" beta/")):
			out = append(out, fmt.Sprintf("received beta's traffic on %s (subscribed %s): %.160s", r.subject, r.sub, r.data))
		case r.sub != a.prefix+".>" && !strings.HasPrefix(r.subject, a.prefix+".") && !strings.HasPrefix(r.subject, "tb.alpha."):
			out = append(out, fmt.Sprintf("received %s outside its inbox (subscribed %s): %.120s", r.subject, r.sub, r.data))
		}
	}
	return out
}
