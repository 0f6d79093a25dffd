package team_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/team"
)

// jsonlEnv makes the test binary a one-shot JSONL writer: open the file
// it names, append one ~1 KiB JSON line, fsync, exit. The process
// benchmarks compare `teambus send` with it.
const jsonlEnv = "TEAMBUS_BENCH_JSONL"

func TestMain(m *testing.M) {
	if path := os.Getenv(jsonlEnv); path != "" {
		os.Exit(appendJSONL(path))
	}
	os.Exit(m.Run())
}

func appendJSONL(path string) int {
	line, _ := json.Marshal(teambus.Message{ID: team.NewMessageID(), From: "tm1", To: teambus.Lead, Type: teambus.MsgInfo, Body: strings.Repeat("x", 1000), TS: time.Now().UTC()})
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := f.Sync(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := f.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// testPolicy is a valid policy in seconds, as tests use.
func testPolicy() teambus.Policy {
	return teambus.Policy{
		Heartbeat: time.Second, MemberTimeout: 3 * time.Second, ProbeTimeout: 2 * time.Second,
		LeadTimeout: 3 * time.Second, ZombieMax: 10 * time.Second, TakeoverAfter: 5 * time.Second,
		BlockedTimeout: 5 * time.Second, StuckTimeout: 10 * time.Second, CheckpointEvery: time.Second,
		AckWait: 2 * time.Second, CrashLimit: 1, MaxAttempts: 2,
	}
}

// tickClock is a clock that moves forward a microsecond on every reading,
// so records created one after another never share a timestamp.
func tickClock() func() time.Time {
	base := time.Now().UTC()
	var n atomic.Int64
	return func() time.Time { return base.Add(time.Duration(n.Add(1)) * time.Microsecond) }
}

// fixture is a team service on a fresh node.
type fixture struct {
	node *node.Node
	conn *bus.Conn
	svc  *team.Service
}

func newFixture(t testing.TB, cfg team.Config) *fixture {
	t.Helper()
	return newFixtureDir(t, t.TempDir(), cfg)
}

func newFixtureDir(t testing.TB, dir string, cfg team.Config) *fixture {
	t.Helper()
	n := nodetest.NewBareServerDir(t, dir)
	c := nodetest.Connect(t, n)
	if cfg.Now == nil {
		cfg.Now = tickClock()
	}
	return &fixture{node: n, conn: c, svc: team.New(c.JS, cfg)}
}

// close closes the connection and the node, as a process exit would.
func (f *fixture) close(t testing.TB) {
	t.Helper()
	f.conn.Close()
	if err := f.node.Close(); err != nil {
		t.Fatal(err)
	}
}

// create makes team id with a lead session and members, each member
// joined with session "s-<member>".
func (f *fixture) create(t testing.TB, id, leadSession string, pol teambus.Policy, members ...string) {
	t.Helper()
	ctx := testCtx(t)
	var specs []team.MemberSpec
	for _, m := range members {
		specs = append(specs, team.MemberSpec{ID: m})
	}
	if _, err := f.svc.CreateTeam(ctx, id, leadSession, specs, pol); err != nil {
		t.Fatalf("create team %s: %v", id, err)
	}
	for _, m := range members {
		if _, err := f.svc.Join(ctx, id, m, "s-"+m); err != nil {
			t.Fatalf("join %s: %v", m, err)
		}
	}
}

func (f *fixture) addTask(t testing.TB, teamID, id string, prio int, deps ...string) *teambus.Task {
	t.Helper()
	tk, err := f.svc.AddTask(testCtx(t), teamID, team.TaskSpec{ID: id, Priority: prio, Deps: deps})
	if err != nil {
		t.Fatalf("add task %s: %v", id, err)
	}
	return tk
}

func (f *fixture) task(t testing.TB, teamID, id string) *teambus.Task {
	t.Helper()
	tk, _, err := f.svc.Store().Task(testCtx(t), teamID, id)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func (f *fixture) member(t testing.TB, teamID, id string) *teambus.Member {
	t.Helper()
	m, _, err := f.svc.Store().Member(testCtx(t), teamID, id)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// msgCount is the number of messages in the team's mailbox stream, not
// counting incarnation markers (one per Join).
func (f *fixture) msgCount(t testing.TB, teamID string) uint64 {
	t.Helper()
	st, err := f.conn.JS.Stream(testCtx(t), mailbox.MailboxPrefix+teamID)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(testCtx(t), jetstream.WithSubjectFilter("tb."+teamID+".inc.*"))
	if err != nil {
		t.Fatal(err)
	}
	n := info.State.Msgs
	for _, c := range info.State.Subjects {
		n -= c
	}
	return n
}

func (f *fixture) consumer(t testing.TB, teamID, name string) jetstream.Consumer {
	t.Helper()
	// A recipient's consumers are made on demand.
	mb := f.svc.Mailbox(teamID)
	var (
		c   jetstream.Consumer
		err error
	)
	switch {
	case strings.HasPrefix(name, "in_"):
		c, err = mb.AgentInbox(testCtx(t), strings.TrimPrefix(name, "in_"))
	case strings.HasPrefix(name, "sc_"):
		c, err = mb.SidecarInbox(testCtx(t), strings.TrimPrefix(name, "sc_"))
	default:
		c, err = f.conn.JS.Consumer(testCtx(t), mailbox.MailboxPrefix+teamID, name)
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// actorOf returns the actor of a member joined by fixture.create.
func actorOf(teamID, id string) team.Actor {
	return team.Actor{Team: teamID, Member: id, Session: "s-" + id}
}

// zombieTM1 returns a fixture with team alpha (lead session L) whose
// member tm1 is a zombie, tm1's actor and its epoch.
func zombieTM1(t testing.TB) (*fixture, team.Actor, int64) {
	t.Helper()
	f := newFixture(t, team.Config{})
	f.create(t, "alpha", "L", testPolicy(), "tm1")
	epoch := f.member(t, "alpha", "tm1").Epoch
	if err := f.svc.SetMemberStatus(testCtx(t), "alpha", "tm1", epoch, teambus.MemberZombie); err != nil {
		t.Fatal(err)
	}
	return f, actorOf("alpha", "tm1"), epoch
}

// leadOf returns the lead actor in session.
func leadOf(teamID, session string) team.Actor {
	return team.Actor{Team: teamID, Member: teambus.Lead, Session: session}
}
