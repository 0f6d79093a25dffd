package node

import (
	"errors"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/teamapi"
)

// judgeRig runs the judge on a fake clock: each job it asks for is
// recorded and answered at once, as the service's workers would.
type judgeRig struct {
	t    *testing.T
	j    *judge
	now  time.Time
	inc  map[liveKey]incarnation
	fail error // the outcome of writes and ends while set
	rev  uint64
	log  []liveJob
}

const rigTimeout = 10 * time.Second

func newRig(t *testing.T) *judgeRig {
	return &judgeRig{t: t, j: newJudge(), now: time.Unix(1000, 0), inc: map[liveKey]incarnation{}}
}

func (r *judgeRig) run(jobs []liveJob) {
	for len(jobs) > 0 {
		job := jobs[0]
		jobs = jobs[1:]
		r.log = append(r.log, job)
		switch job.kind {
		case jobLoad:
			inc, ok := r.inc[job.key]
			var err error
			if !ok {
				err = teambus.NotFoundf("no member")
			}
			jobs = append(jobs, r.j.loaded(job.key, inc, err, r.now)...)
		case jobWrite:
			if r.fail != nil {
				jobs = append(jobs, r.j.wrote(job, 0, r.fail, r.now)...)
				continue
			}
			r.rev++
			jobs = append(jobs, r.j.wrote(job, r.rev, nil, r.now)...)
		case jobEnd:
			jobs = append(jobs, r.j.endDone(job, r.fail, r.now)...)
		}
	}
}

func (r *judgeRig) beat(member string, b teamapi.Beat, conn connID) {
	b.Member = member
	r.run(r.j.beat(liveKey{"t", member}, b, conn, r.now))
}

// advance moves the clock by d in sweeps of liveSweep, as the service's
// ticker does.
func (r *judgeRig) advance(d time.Duration) {
	end := r.now.Add(d)
	for r.now.Before(end) {
		r.now = r.now.Add(liveSweep)
		r.run(r.j.sweep(r.now))
	}
}

// count is how many jobs of kind were asked for since mark.
func (r *judgeRig) count(kind jobKind, mark int) int {
	n := 0
	for _, j := range r.log[mark:] {
		if j.kind == kind {
			n++
		}
	}
	return n
}

func TestJudge_RenewsAtHalfTTLNotPerBeat(t *testing.T) {
	r := newRig(t)
	r.inc[liveKey{"t", "tm1"}] = incarnation{session: "s1", epoch: 2, timeout: rigTimeout}
	b := teamapi.Beat{Session: "s1", Epoch: 2, Status: teambus.MemberIdle}
	r.beat("tm1", b, connID{})
	if r.count(jobLoad, 0) != 1 || r.count(jobWrite, 0) != 1 {
		t.Fatalf("first beat: jobs %+v, want one load and one write", r.log)
	}
	if w := r.log[len(r.log)-1]; w.ttl != 15*time.Second || w.hb.Epoch != 2 || w.hb.Session != "s1" {
		t.Fatalf("write %+v, want ttl 15s (timeout + renewal), epoch 2, session s1", w)
	}
	mark := len(r.log)
	// 60 beats a second apart: a write every half timeout (5 s), no read.
	for i := 0; i < 60; i++ {
		r.advance(time.Second)
		r.beat("tm1", b, connID{})
	}
	if n := r.count(jobWrite, mark); n != 12 {
		t.Fatalf("%d writes for 60 beats over 60 s, want 12 (every 5 s)", n)
	}
	if n := r.count(jobLoad, mark); n != 0 {
		t.Fatalf("%d reads for 60 beats, want none (the incarnation is known)", n)
	}
	if n := r.count(jobEnd, mark); n != 0 {
		t.Fatalf("%d ends of a member that beats", n)
	}
	// A status change is written at once.
	mark = len(r.log)
	b.Status = teambus.MemberInProgress
	r.advance(time.Second)
	r.beat("tm1", b, connID{})
	if n := r.count(jobWrite, mark); n != 1 {
		t.Fatalf("status change: %d writes, want 1", n)
	}
}

func TestJudge_SilenceEndsTheKeyAtTheTimeout(t *testing.T) {
	r := newRig(t)
	r.inc[liveKey{"t", "tm1"}] = incarnation{session: "s1", epoch: 1, timeout: rigTimeout}
	b := teamapi.Beat{Session: "s1", Epoch: 1}
	r.beat("tm1", b, connID{})
	last := r.now
	mark := len(r.log)
	r.advance(rigTimeout - liveSweep)
	if n := r.count(jobEnd, mark); n != 0 {
		t.Fatalf("ended after %s of silence, before the timeout", r.now.Sub(last))
	}
	r.advance(liveSweep)
	if n := r.count(jobEnd, mark); n != 1 {
		t.Fatalf("%d ends after the timeout of silence, want 1", n)
	}
	r.advance(3 * rigTimeout)
	if n := r.count(jobEnd, mark); n != 1 {
		t.Fatalf("%d ends, want the one", n)
	}
	// It beats again: the incarnation is read again (the lead may have
	// declared it crashed meanwhile), then the key written.
	mark = len(r.log)
	r.beat("tm1", b, connID{})
	if r.count(jobLoad, mark) != 1 || r.count(jobWrite, mark) != 1 {
		t.Fatalf("beat after the end: jobs %+v, want a read then a write", r.log[mark:])
	}
}

func TestJudge_FailedWritesAreNoSilence(t *testing.T) {
	r := newRig(t)
	r.inc[liveKey{"t", "tm1"}] = incarnation{session: "s1", epoch: 1, timeout: rigTimeout}
	b := teamapi.Beat{Session: "s1", Epoch: 1}
	r.beat("tm1", b, connID{})
	r.fail = errors.New("no leader")
	mark := len(r.log)
	for i := 0; i < 30; i++ {
		r.advance(time.Second)
		r.beat("tm1", b, connID{})
	}
	if n := r.count(jobEnd, mark); n != 0 {
		t.Fatalf("%d ends of a member that beats while writes fail", n)
	}
	if n := r.count(jobWrite, mark); n == 0 {
		t.Fatal("no write tried while writes fail")
	}
}

func TestJudge_StaleEpochDroppedAndTold(t *testing.T) {
	r := newRig(t)
	k := liveKey{"t", "tm1"}
	r.inc[k] = incarnation{session: "s2", epoch: 2, timeout: rigTimeout}
	r.beat("tm1", teamapi.Beat{Session: "s2", Epoch: 2}, connID{})
	mark := len(r.log)
	r.advance(time.Second)
	r.beat("tm1", teamapi.Beat{Session: "s1", Epoch: 1}, connID{})
	if r.count(jobWrite, mark) != 0 || r.count(jobLoad, mark) != 0 || r.count(jobFence, mark) != 1 {
		t.Fatalf("stale beat: jobs %+v, want one fence notice, no read, no write", r.log[mark:])
	}
	f := r.log[len(r.log)-1].control
	if f.Type != teamapi.ControlFenced || f.Epoch != 1 || f.Session != "s1" || f.Current != 2 {
		t.Fatalf("notice %+v", f)
	}
	// A same-epoch beat of another session is stale too.
	r.advance(2 * time.Second)
	mark = len(r.log)
	r.beat("tm1", teamapi.Beat{Session: "x", Epoch: 2}, connID{})
	if r.count(jobFence, mark) != 1 || r.count(jobWrite, mark) != 0 {
		t.Fatalf("other session: jobs %+v", r.log[mark:])
	}
	// The stale beats were not the member's: it is still judged on its
	// own, and silent for the timeout since its last beat.
	r.advance(rigTimeout)
	if n := r.count(jobEnd, 0); n != 1 {
		t.Fatalf("%d ends, want 1 (stale beats are no sign of life)", n)
	}
	// A newer epoch is read once, then written.
	r.inc[k] = incarnation{session: "s3", epoch: 3, timeout: rigTimeout}
	mark = len(r.log)
	r.beat("tm1", teamapi.Beat{Session: "s3", Epoch: 3}, connID{})
	if r.count(jobLoad, mark) != 1 || r.count(jobWrite, mark) != 1 {
		t.Fatalf("new incarnation: jobs %+v", r.log[mark:])
	}
	// A crashed incarnation is fenced on its beat.
	r.inc[k] = incarnation{session: "s3", epoch: 3, fenced: "crashed", timeout: rigTimeout}
	r.advance(rigTimeout) // ended: the next beat reads again
	mark = len(r.log)
	r.beat("tm1", teamapi.Beat{Session: "s3", Epoch: 3}, connID{})
	if r.count(jobFence, mark) != 1 || r.count(jobWrite, mark) != 0 {
		t.Fatalf("crashed incarnation: jobs %+v", r.log[mark:])
	}
}

func TestJudge_ConnectionClosedEndsAtOnce(t *testing.T) {
	r := newRig(t)
	r.inc[liveKey{"t", "tm1"}] = incarnation{session: "s1", epoch: 1, timeout: rigTimeout}
	r.inc[liveKey{"t", teambus.Lead}] = incarnation{session: "L", epoch: 1, timeout: rigTimeout}
	c := connID{server: "n1", id: 7}
	r.beat("tm1", teamapi.Beat{Session: "s1", Epoch: 1}, c)
	r.beat(teambus.Lead, teamapi.Beat{Session: "L", Epoch: 1}, connID{server: "n1", id: 8})
	mark := len(r.log)
	r.run(r.j.closed(connID{server: "n1", id: 99}, r.now)) // another connection
	r.run(r.j.closed(connID{server: "n1", id: 8}, r.now))  // the lead's: judged by silence
	if n := r.count(jobEnd, mark); n != 0 {
		t.Fatalf("%d ends for connections that do not beat a member", n)
	}
	r.run(r.j.closed(c, r.now))
	if n := r.count(jobEnd, mark); n != 1 || r.log[len(r.log)-1].key.member != "tm1" {
		t.Fatalf("jobs %+v, want tm1's key ended at once", r.log[mark:])
	}
}

func TestJudge_CleanStop(t *testing.T) {
	r := newRig(t)
	r.inc[liveKey{"t", "tm1"}] = incarnation{session: "s2", epoch: 2, timeout: rigTimeout}
	r.beat("tm1", teamapi.Beat{Session: "s2", Epoch: 2}, connID{})
	mark := len(r.log)
	r.beat("tm1", teamapi.Beat{Session: "s1", Epoch: 1, Stop: true}, connID{})
	if n := r.count(jobStop, mark); n != 0 {
		t.Fatal("a replaced incarnation's stop removed its successor's key")
	}
	r.beat("tm1", teamapi.Beat{Session: "s2", Epoch: 2, Stop: true}, connID{})
	if n := r.count(jobStop, mark); n != 1 || r.log[len(r.log)-1].rev == 0 {
		t.Fatalf("stop: jobs %+v, want a delete at the written revision", r.log[mark:])
	}
	r.advance(2 * rigTimeout)
	if n := r.count(jobEnd, mark); n != 0 {
		t.Fatal("a stopped member was judged silent")
	}
}

func TestJudge_RestartGrace(t *testing.T) {
	// A judge that starts (or whose connection was cut) hears beats from
	// then: nobody is judged on the silence before.
	r := newRig(t)
	r.inc[liveKey{"t", "tm1"}] = incarnation{session: "s1", epoch: 1, timeout: rigTimeout}
	r.advance(3 * rigTimeout) // no beat yet: nothing to judge
	if len(r.log) != 0 {
		t.Fatalf("jobs before any beat: %+v", r.log)
	}
	r.beat("tm1", teamapi.Beat{Session: "s1", Epoch: 1}, connID{})
	r.advance(rigTimeout / 2)
	// Cut for a while: then a full timeout of listening from the cut's end.
	r.now = r.now.Add(rigTimeout)
	r.j.grace(r.now)
	mark := len(r.log)
	r.advance(rigTimeout - liveSweep)
	if n := r.count(jobEnd, mark); n != 0 {
		t.Fatal("judged silent for the time the judge was not listening")
	}
	r.advance(liveSweep)
	if n := r.count(jobEnd, mark); n != 1 {
		t.Fatalf("%d ends a timeout after the grace, want 1", n)
	}
}
