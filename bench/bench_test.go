package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus/bustest"
)

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}, {0, time.Millisecond}} {
		if got := percentile(ds, c.q); got != c.want {
			t.Errorf("percentile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("percentile of none = %v, want 0", got)
	}
	if ds[0] != 100*time.Millisecond {
		t.Errorf("percentile sorted its input in place")
	}
}

func TestTailLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.jsonl")
	if err := writeMailboxJSONL(path, 5000, 100); err != nil {
		t.Fatal(err)
	}
	lines, err := tailLines(path, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 10 {
		t.Fatalf("got %d lines, want 10", len(lines))
	}
	for i, l := range lines {
		var m teambus.Message
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if want := uint64(4991 + i); m.Seq != want {
			t.Errorf("line %d has seq %d, want %d", i, m.Seq, want)
		}
	}
}

// TestJSONLPeer_AppendsOneLine builds the standalone peer as a run does
// and runs it twice: two lines, each a message with the body size asked.
func TestJSONLPeer_AppendsOneLine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	exe, err := buildPeer(ctx, filepath.Join(dir, "peer"), "jsonl", jsonlPeerSource)
	if errors.Is(err, errNoGo) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "once.jsonl")
	for i := 0; i < 2; i++ {
		if _, err := timeRun(ctx, exe, "--size", "64", path); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2", len(lines))
	}
	var m teambus.Message
	if err := json.Unmarshal([]byte(lines[1]), &m); err != nil || len(m.Body) != 64 || m.ID == "" {
		t.Errorf("line = %q (%v), want a message with a 64-byte body", lines[1], err)
	}
	if _, err := timeRun(ctx, exe); err == nil {
		t.Errorf("the peer without a file exited 0")
	}
}

func TestStateClaims_EveryTaskOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	s, err := stateClaims(ctx, dir, 20, 4)
	if err != nil {
		t.Fatal(err)
	}
	if s.n != 20 {
		t.Errorf("claimed %d tasks, want 20", s.n)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "state.json"))
	var st fileState
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	for _, tk := range st.Tasks {
		if tk.Status != teambus.TaskComplete {
			t.Errorf("task %s is %s, want complete", tk.ID, tk.Status)
		}
	}
}

func TestConfig_Validate(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"no binary", Config{}},
		{"unknown section", Config{Exe: "x", Only: []string{"nope"}}},
		{"too many heartbeaters", Config{Exe: "x", MemoryTeams: 1, ScaleMembers: 11}},
		{"short timeout", Config{Exe: "x", MemberTimeout: 500 * time.Millisecond}},
	} {
		if err := c.cfg.Defaults().Validate(); err == nil {
			t.Errorf("%s: Validate() = nil, want an error", c.name)
		}
	}
	if err := (Config{Exe: "x"}).Defaults().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	if err := (Config{Exe: "x", Quick: true}).Defaults().Validate(); err != nil {
		t.Errorf("quick defaults: %v", err)
	}
}

// TestRun_Throughput runs the throughput section with tiny loops: every
// row is there, the ratios are computed and the table prints them.
func TestRun_Throughput(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := Run(ctx, Config{Dir: t.TempDir(), Exe: "unused", Quick: true, Only: []string{"throughput"}, Duration: 150 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{keyFsync, keyJSONL, keyInbox + "100", keyInbox + "1000", keyInbox + "10000",
		keyAsync, keyMbSend, keySvcSend, keyAsync + keyIntervalSfx, keyMbSend + keyIntervalSfx, keySvcSend + keyIntervalSfx,
		keyReqSend, keyReqAsync, keyReqSend + keyIntervalSfx, keyReqAsync + keyIntervalSfx} {
		row := res.Row(key)
		if row == nil {
			t.Errorf("no row %s", key)
			continue
		}
		if row.Value <= 0 || row.N == 0 {
			t.Errorf("row %s: value %v over %d ops", key, row.Value, row.N)
		}
	}
	if row := res.Row(keyAsync); row == nil || len(row.Vs) != 2 {
		t.Errorf("pipelined send row has ratios %+v, want two", row)
	}
	var b bytes.Buffer
	res.WriteTable(&b)
	for _, want := range []string{"| limit", "× JSONL+fsync", "pipelined durable send ≥ 1.0× JSONL append + fsync", "not measured"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	if res.Machine.FsyncP50 <= 0 || res.Machine.CPUs == 0 {
		t.Errorf("machine = %+v", res.Machine)
	}
}

func TestWriteTable_Formats(t *testing.T) {
	res := &Result{Rows: []Row{
		{Group: "detection", Key: "d", Name: "silence", Value: 0.12, Unit: UnitOverdue, P50: -0.01, P99: 0.12, N: 3},
		{Group: "memory", Key: "m", Name: "idle", Value: 21.25, Unit: UnitMiB, N: 1},
		{Group: "peer", Key: "p", Name: "peer", Value: 12345, Unit: UnitRate, N: 1},
	}}
	var b bytes.Buffer
	res.WriteTable(&b)
	for _, want := range []string{"timeout + 0.12 s (p99)", "-0.01 s", "21.2 MiB", "12,345 op/s"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

// TestRun_HookAndMCP runs the hook and mcp sections with a few runs
// against the built teambus binary: every row is there with its ratio,
// and the targets of issues 13 and 14 are checked, not skipped.
func TestRun_HookAndMCP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the teambus binary")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	exe := bustest.Binary(t) // built once for the package's tests
	res, err := Run(ctx, Config{Dir: t.TempDir(), Exe: exe, Quick: true, Only: []string{"hook", "mcp"}, HookRuns: 3, SessionStartRuns: 2, MCPCalls: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{keyHookStart, keyHookEmpty, keyHookPeer, keyHookSStart, keyMCPDirect, keyMCPSend, keyMCPInbox50, keyMCPInbox50Short} {
		row := res.Row(key)
		if row == nil {
			t.Errorf("no row %s", key)
			continue
		}
		if row.Value <= 0 || row.N == 0 || row.Skipped {
			t.Errorf("row %s: value %v over %d runs (skipped %v)", key, row.Value, row.N, row.Skipped)
		}
	}
	for _, key := range []string{keyHookEmpty, keyHookCreds, keyMCPSend} {
		if row := res.Row(key); row != nil && len(row.Vs) != 1 {
			t.Errorf("row %s has ratios %+v, want one", key, row.Vs)
		}
	}
	measured := 0
	for _, tg := range res.Targets {
		if (strings.Contains(tg.Text, "hook") || strings.Contains(tg.Text, "mcp")) && !strings.Contains(tg.Text, "transcript") && !strings.Contains(tg.Text, "as an agent runs it") {
			measured++
			if tg.Skipped || tg.Got == "" {
				t.Errorf("target %q not measured", tg.Text)
			}
		}
	}
	if measured != 8 {
		t.Errorf("%d hook and mcp targets, want 8", measured)
	}
}

// TestJSONLPeer_NoGoToolchain: without a go command the peer is not
// built, its row says why, and the targets that need it are not measured.
func TestJSONLPeer_NoGoToolchain(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("GOROOT", "")
	if _, err := buildPeer(context.Background(), t.TempDir(), "jsonl", jsonlPeerSource); !errors.Is(err, errNoGo) {
		t.Fatalf("build without go: %v, want errNoGo", err)
	}
	r := &run{cfg: Config{}.Defaults(), res: &Result{}}
	r.skippedRow("peer", keyHookPeer, peerName, errNoGo)
	r.res.add(Row{Group: "hook", Key: keyHookEmpty, Name: "hook", Value: 12, Unit: UnitMs, P50: 12, P99: 20, N: 3})
	r.compareAll()
	r.res.Targets = r.targets()
	var b bytes.Buffer
	r.res.WriteTable(&b)
	for _, want := range []string{"| skipped ", "skipped: no go toolchain to build the peer", "≤ 4× a one-shot JSONL append + fsync process |  | not measured"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	if len(r.res.Warnings) != 0 {
		t.Errorf("warnings %v for a missing toolchain, want none", r.res.Warnings)
	}
}

// TestClaimPeer_ClaimsOnceEach builds the standalone claim peer and runs two
// claimers: each claims a different task, a second claim by the same
// member is refused, a complete frees it to claim again.
func TestClaimPeer_ClaimsOnceEach(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	exe, err := buildPeer(ctx, filepath.Join(dir, "peer"), "claim", claimPeerSource)
	if errors.Is(err, errNoGo) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state.json")
	if _, err := runOut(ctx, exe, "init", "--tasks", "3", state); err != nil {
		t.Fatal(err)
	}
	a, err := runOut(ctx, exe, "next", "--member", "a", state)
	if err != nil {
		t.Fatal(err)
	}
	b, err := runOut(ctx, exe, "next", "--member", "b", state)
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatalf("a and b both claimed %q", a)
	}
	if _, err := runOut(ctx, exe, "next", "--member", "a", state); err == nil {
		t.Fatal("a claimed a second task while working on one")
	}
	if _, err := runOut(ctx, exe, "complete", "--member", "a", "--task", strings.TrimSpace(a), state); err != nil {
		t.Fatal(err)
	}
	if c, err := runOut(ctx, exe, "next", "--member", "a", state); err != nil || c == a || c == b {
		t.Fatalf("a's next claim = %q, %v; want the third task", c, err)
	}
}
