package team

import (
	"context"
	"sync"
	"time"

	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/teamapi"
)

// The send quota: within any window of DefaultQuotaWindow, one member
// (not the lead) stores at most a share (1/DefaultQuotaShare) of its
// team's mailbox limit. So one member flooding the team stops at its
// share and the others still send: filling a team takes several members
// or several windows, and the lead and the operator can always write. A
// send past the quota is refused (teamapi.ErrQuota, exit 1) and stores
// nothing; the message says when it fits again. The count is kept in the
// memory of the service instance: approximate across a restart or
// between the instances of a cluster, exact enough for its purpose.
const (
	DefaultQuotaWindow = 10 * time.Minute
	DefaultQuotaShare  = 4
	// quotaOverhead is what a message costs beside its body and data
	// (subject, headers, the stored record): a flood of empty messages
	// counts too.
	quotaOverhead = 256
	quotaBuckets  = 10
	// quotaLimitTTL is how long a team's mailbox limit is taken as read:
	// a `team set` counts within it.
	quotaLimitTTL = time.Minute
)

// sendQuota counts the bytes each member stored per slice of the window.
type sendQuota struct {
	mu     sync.Mutex
	used   map[string]*quotaUse // team/member
	limits map[string]quotaLimit
}

type quotaUse struct {
	slot  [quotaBuckets]int64 // the slice each bucket counts (its start / slice)
	bytes [quotaBuckets]int64
}

type quotaLimit struct {
	bytes int64
	read  time.Time
}

func (s *Service) quotaWindow() (window time.Duration, share int64, on bool) {
	window, share = s.cfg.SendQuotaWindow, int64(s.cfg.SendQuotaShare)
	if window < 0 || share < 0 {
		return 0, 0, false
	}
	if window == 0 {
		window = DefaultQuotaWindow
	}
	if share == 0 {
		share = DefaultQuotaShare
	}
	return window, share, true
}

// quotaCost is what a message counts against the quota.
func quotaCost(body string, data []byte) int64 {
	return int64(len(body)+len(data)) + quotaOverhead
}

// checkQuota refuses n more bytes from a member of team when they would
// pass its share; the lead is not limited.
func (s *Service) checkQuota(ctx context.Context, a Actor, n int64) error {
	window, share, on := s.quotaWindow()
	if !on || a.IsLead() {
		return nil
	}
	now := s.Now()
	slice := window / quotaBuckets
	cur := now.UnixNano() / int64(slice)
	key := a.Team + "/" + a.Member
	q := &s.quota
	q.mu.Lock()
	used, oldest := q.sum(key, cur)
	q.mu.Unlock()
	if used+n <= s.cachedQuota(ctx, a.Team, share, false) {
		return nil
	}
	// Over by the cached limit: read it again, `team set` may have raised it.
	limit := s.cachedQuota(ctx, a.Team, share, true)
	if used+n <= limit {
		return nil
	}
	// When it fits again: as the oldest slices leave the window.
	wait := window
	q.mu.Lock()
	u := q.used[key]
	if u != nil {
		left := used
		for sl := oldest; sl <= cur; sl++ {
			left -= u.at(sl)
			if left+n <= limit {
				wait = time.Duration((sl+quotaBuckets)*int64(slice) - now.UnixNano())
				break
			}
		}
	}
	q.mu.Unlock()
	return teamapi.Quotaf("%s of team %s stored %s of mail in the last %s, its share of the team's mailbox (1/%d of %s): nothing was sent; send it again in %s (or ask the lead to raise the mailbox)",
		a.Member, a.Team, bus.Size(used), window, share, bus.Size(limit*share), wait.Round(time.Second))
}

// addQuota counts n stored bytes of a member.
func (s *Service) addQuota(a Actor, n int64) {
	window, _, on := s.quotaWindow()
	if !on || a.IsLead() || n <= 0 {
		return
	}
	cur := s.Now().UnixNano() / int64(window/quotaBuckets)
	key := a.Team + "/" + a.Member
	q := &s.quota
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.used == nil {
		q.used = map[string]*quotaUse{}
	}
	u := q.used[key]
	if u == nil {
		u = &quotaUse{}
		q.used[key] = u
	}
	i := cur % quotaBuckets
	if u.slot[i] != cur {
		u.slot[i], u.bytes[i] = cur, 0
	}
	u.bytes[i] += n
}

// sum is what key stored in the window ending in slice cur, and the
// oldest slice of the window. The caller holds q.mu.
func (q *sendQuota) sum(key string, cur int64) (used, oldest int64) {
	oldest = cur - quotaBuckets + 1
	u := q.used[key]
	if u == nil {
		return 0, oldest
	}
	for i := range u.slot {
		if u.slot[i] >= oldest && u.slot[i] <= cur {
			used += u.bytes[i]
		}
	}
	return used, oldest
}

// at is what was stored in slice sl, when the bucket still counts it.
func (u *quotaUse) at(sl int64) int64 {
	i := sl % quotaBuckets
	if u.slot[i] != sl {
		return 0
	}
	return u.bytes[i]
}

// cachedQuota is a member's share of team's mailbox limit: the live
// limit, read at most once a quotaLimitTTL unless fresh.
func (s *Service) cachedQuota(ctx context.Context, team string, share int64, fresh bool) int64 {
	now := s.Now()
	q := &s.quota
	q.mu.Lock()
	l, ok := q.limits[team]
	q.mu.Unlock()
	if ok && !fresh && now.Sub(l.read) < quotaLimitTTL {
		return l.bytes / share
	}
	limit := s.Mailbox(team).Config().MaxBytes
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if st, err := s.js.Stream(rctx, s.Mailbox(team).Stream()); err == nil && st.CachedInfo().Config.MaxBytes > 0 {
		limit = st.CachedInfo().Config.MaxBytes
	} else if ok {
		limit = l.bytes
	}
	if limit <= 0 {
		return 1 << 62 // no limit known: no quota
	}
	q.mu.Lock()
	if q.limits == nil {
		q.limits = map[string]quotaLimit{}
	}
	q.limits[team] = quotaLimit{bytes: limit, read: now}
	q.mu.Unlock()
	return limit / share
}

// quotaResult counts what a send stored: a duplicate stored nothing.
func (s *Service) quotaResult(a Actor, dup bool, n int64) {
	if !dup {
		s.addQuota(a, n)
	}
}
