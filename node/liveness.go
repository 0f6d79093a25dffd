package node

import (
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/internal/sidecar"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/teamapi"
)

// The liveness judge keeps the latest beat of every member in memory and
// decides when the member's heartbeat key is written: when the member's
// incarnation (epoch) or status changes, and when the key's time to live
// needs renewing (every half timeout), never once per beat. It ends the
// key (a purge, which watchers see as an expiry) when the member has been
// silent for its timeout, or at once when the connection that beats
// closes. It judges fencing on the beat: a beat of a replaced, crashed,
// paused or shut-down incarnation is dropped and the incarnation told on
// its control subject; the incarnation is read once per member and again
// only when a beat names a newer epoch or follows an ended key.
//
// The judge does no I/O: each method returns the jobs to run (a read of
// the incarnation, a write or an end of the key, a control message), and
// each job's outcome comes back through done. Times are the caller's
// clock; silence is judged on when beats were received, never on whether
// writes succeeded, so a bus without a leader causes no silence.

// liveKey names one member's heartbeat (teambus.Lead for the lead).
type liveKey struct{ team, member string }

// connID names a client connection: the server's name and the client id
// on it, as the server's request info and disconnect events tell them.
type connID struct {
	server string
	id     uint64
}

// incarnation is what the judge knows of a member's current incarnation.
type incarnation struct {
	session string
	epoch   int64
	// fenced says why the incarnation may not beat (crashed, paused, shut
	// down); empty when it may.
	fenced string
	// timeout is member-timeout (lead-timeout for the lead).
	timeout time.Duration
}

type jobKind int

const (
	jobLoad  jobKind = iota // read the incarnation
	jobWrite                // write the key (compare-and-set on rev)
	jobEnd                  // purge the key: the member went silent
	jobStop                 // delete the key: a clean stop
	jobFence                // tell the beater it is fenced
)

// liveJob is one piece of I/O the judge asks for.
type liveJob struct {
	kind    jobKind
	key     liveKey
	hb      teambus.Heartbeat // jobWrite
	ttl     time.Duration     // jobWrite
	rev     uint64            // jobWrite, jobEnd, jobStop: the last revision this instance wrote
	epoch   int64             // jobEnd, jobStop: the incarnation ended
	session string            // jobEnd: the incarnation's session
	at      time.Time         // jobEnd: its last beat
	why     string            // jobEnd: silence or a closed connection
	control teamapi.Control   // jobFence
}

// liveEntry is one member as the judge sees it.
type liveEntry struct {
	inc      incarnation
	loaded   bool
	reload   bool      // a beat named a newer epoch, or the key was ended: read again
	busy     bool      // a job of this entry is running
	retryAt  time.Time // no job before (after a failure)
	last     teamapi.Beat
	conn     connID
	heard    time.Time // when the last accepted beat arrived (zero: none yet)
	wrote    time.Time // when this instance last wrote the key (zero: not since it ended)
	rev      uint64
	wEpoch   int64
	wStatus  teambus.MemberStatus
	ended    bool // the key was ended for silence; the next beat writes it again
	endedAt  time.Time
	suspect  bool // its connection closed while a job ran: end the key after it
	fencedAt time.Time
}

// judge is the liveness judge of one service instance. Its methods are
// not safe for concurrent use: the service serializes them.
type judge struct {
	entries map[liveKey]*liveEntry
	byConn  map[connID]liveKey
}

func newJudge() *judge {
	return &judge{entries: map[liveKey]*liveEntry{}, byConn: map[connID]liveKey{}}
}

// retryGap is how long the judge waits after a failed job of an entry.
const liveRetryGap = time.Second

// renewAfter is the age at which a key is written again: half its
// timeout, so a member that beats never lets it expire.
func renewAfter(timeout time.Duration) time.Duration { return sidecar.RenewEvery(timeout) }

// keyTTL is the time to live of a written key: its timeout and the
// renewal period (the sidecars' backstop), so the judge, not the TTL,
// ends it on silence; the TTL ends it only when no service instance is
// left to judge.
func keyTTL(timeout time.Duration) time.Duration { return kv.TTL(sidecar.Backstop(timeout)) }

// beat handles a beat received at now from conn.
func (j *judge) beat(k liveKey, b teamapi.Beat, conn connID, now time.Time) []liveJob {
	e := j.entries[k]
	if e == nil {
		e = &liveEntry{}
		j.entries[k] = e
	}
	if b.Stop {
		return j.stop(k, e, b)
	}
	if e.loaded && !e.reload {
		if why := stale(e.inc, b); why != "" {
			return j.fence(k, e, b, why, now)
		}
		if b.Epoch > e.inc.epoch {
			e.reload = true // registered since the judge read it
		}
	}
	e.last = b
	e.heard = now
	if conn != (connID{}) && conn != e.conn {
		if j.byConn[e.conn] == k {
			delete(j.byConn, e.conn)
		}
		e.conn = conn
		j.byConn[conn] = k
	}
	return j.next(k, e, now)
}

// stale says why beat b is not of the current incarnation inc, or "".
func stale(inc incarnation, b teamapi.Beat) string {
	switch {
	case b.Epoch < inc.epoch:
		return "a newer incarnation registered"
	case b.Epoch == inc.epoch && inc.session != "" && b.Session != inc.session:
		return "the session is not the incarnation's"
	case b.Epoch == inc.epoch && inc.fenced != "":
		return inc.fenced
	}
	return ""
}

// next is the job an entry needs now, if any: a read of its incarnation,
// or a write of its key.
func (j *judge) next(k liveKey, e *liveEntry, now time.Time) []liveJob {
	if e.busy || now.Before(e.retryAt) || e.heard.IsZero() {
		return nil
	}
	if !e.loaded || e.reload {
		e.busy = true
		return []liveJob{{kind: jobLoad, key: k}}
	}
	b := e.last
	if !e.wrote.IsZero() && !e.ended && b.Epoch == e.wEpoch && b.Status == e.wStatus && now.Sub(e.wrote) < renewAfter(e.inc.timeout) {
		return nil
	}
	e.busy = true
	return []liveJob{{kind: jobWrite, key: k, rev: e.rev, ttl: keyTTL(e.inc.timeout),
		hb: teambus.Heartbeat{Member: k.member, Session: b.Session, Epoch: b.Epoch, Status: b.Status, Task: b.Task, ContextPct: b.ContextPct, PID: b.PID, TS: now}}}
}

// fence drops a stale beat and tells its sender, at most once a second.
func (j *judge) fence(k liveKey, e *liveEntry, b teamapi.Beat, why string, now time.Time) []liveJob {
	if !e.fencedAt.IsZero() && now.Sub(e.fencedAt) < time.Second {
		return nil
	}
	e.fencedAt = now
	return []liveJob{{kind: jobFence, key: k, control: teamapi.Control{Type: teamapi.ControlFenced, Team: k.team, Member: k.member,
		Session: b.Session, Epoch: b.Epoch, Current: e.inc.epoch, Reason: why, At: now.UTC()}}}
}

// stop handles a clean stop: the key is deleted unless a newer
// incarnation holds it, and the entry forgotten.
func (j *judge) stop(k liveKey, e *liveEntry, b teamapi.Beat) []liveJob {
	if e.loaded && b.Epoch < e.inc.epoch {
		return nil // a replaced incarnation stopping: the key is its successor's
	}
	rev := e.rev
	if e.wEpoch != b.Epoch {
		rev = 0
	}
	j.forget(k, e)
	return []liveJob{{kind: jobStop, key: k, rev: rev, epoch: b.Epoch}}
}

func (j *judge) forget(k liveKey, e *liveEntry) {
	if j.byConn[e.conn] == k {
		delete(j.byConn, e.conn)
	}
	delete(j.entries, k)
}

// sweep ends the keys of members silent for their timeout at now.
func (j *judge) sweep(now time.Time) []liveJob {
	var jobs []liveJob
	for k, e := range j.entries {
		if !e.loaded || e.ended || e.busy || e.heard.IsZero() || now.Before(e.retryAt) || e.inc.timeout <= 0 {
			continue
		}
		if now.Sub(e.heard) >= e.inc.timeout {
			jobs = append(jobs, j.end(k, e, "silent for "+e.inc.timeout.String(), now))
		}
	}
	return jobs
}

// end ends e's key: the member is suspected.
func (j *judge) end(k liveKey, e *liveEntry, why string, now time.Time) liveJob {
	e.busy, e.ended, e.endedAt = true, true, now
	return liveJob{kind: jobEnd, key: k, rev: e.rev, epoch: e.last.Epoch, session: e.last.Session, at: e.heard, why: why}
}

// closed handles the close of connection c: the member that beats on it
// is suspected at once.
func (j *judge) closed(c connID, now time.Time) []liveJob {
	k, ok := j.byConn[c]
	if !ok || k.member == teambus.Lead {
		// The lead is judged by its silence alone: its teammates go
		// zombie when its key ends, which a restarting lead sidecar
		// should not cause.
		return nil
	}
	delete(j.byConn, c)
	e := j.entries[k]
	if e == nil || e.conn != c {
		return nil
	}
	e.conn = connID{}
	if e.busy {
		e.suspect = true
		return nil
	}
	if !e.loaded || e.ended {
		return nil
	}
	return []liveJob{j.end(k, e, "its connection closed", now)}
}

// grace restarts the silence of every member at now: the judge was not
// listening (its connection was cut), so the silence it saw is the bus's.
func (j *judge) grace(now time.Time) {
	for _, e := range j.entries {
		if !e.heard.IsZero() && e.heard.Before(now) {
			e.heard = now
		}
	}
}

// loaded is the outcome of a jobLoad: the incarnation, or err.
func (j *judge) loaded(k liveKey, inc incarnation, err error, now time.Time) []liveJob {
	e := j.entries[k]
	if e == nil {
		return nil
	}
	e.busy = false
	if err != nil {
		e.retryAt = now.Add(liveRetryGap)
		return nil
	}
	e.inc, e.loaded, e.reload = inc, true, false
	if e.suspect {
		e.suspect = false
		if !e.ended && !e.heard.IsZero() {
			return []liveJob{j.end(k, e, "its connection closed", now)}
		}
	}
	if why := stale(inc, e.last); why != "" {
		jobs := j.fence(k, e, e.last, why, now)
		e.heard = time.Time{} // the beat was not the incarnation's
		return jobs
	}
	if e.last.Epoch > inc.epoch {
		// A beat of an epoch not registered (yet): read again later.
		e.reload, e.retryAt, e.heard = true, now.Add(liveRetryGap), time.Time{}
		return nil
	}
	return j.next(k, e, now)
}

// wrote is the outcome of a jobWrite of j: the key's new revision, or err.
func (j *judge) wrote(job liveJob, rev uint64, err error, now time.Time) []liveJob {
	e := j.entries[job.key]
	if e == nil {
		return nil
	}
	e.busy = false
	if err != nil {
		e.retryAt = now.Add(liveRetryGap)
		return nil
	}
	e.rev, e.wrote, e.wEpoch, e.wStatus, e.ended = rev, now, job.hb.Epoch, job.hb.Status, false
	if e.suspect {
		e.suspect = false
		return []liveJob{j.end(job.key, e, "its connection closed", now)}
	}
	return j.next(job.key, e, now)
}

// endDone is the outcome of a jobEnd.
func (j *judge) endDone(job liveJob, err error, now time.Time) []liveJob {
	e := j.entries[job.key]
	if e == nil {
		return nil
	}
	e.busy = false
	if err != nil {
		// Not ended: the next sweep tries again.
		e.ended, e.retryAt = false, now.Add(liveRetryGap)
		return nil
	}
	e.rev, e.wrote = 0, time.Time{}
	// The lead may declare the member crashed: a later beat reads the
	// incarnation again before it writes.
	e.reload = true
	if e.heard.After(e.endedAt) {
		return j.next(job.key, e, now) // it beat again meanwhile
	}
	return nil
}
