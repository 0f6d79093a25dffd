package team

import (
	"context"

	"github.com/teambus/teambus/mailbox"
)

// Lease leases the actor's unacknowledged mail (mailbox.Mailbox.Lease): the
// messages stay in flight, invisible to other readers, until the caller
// acks or releases them. The actor is checked for fencing first, and a
// lease counts as the member's activity.
func (s *Service) Lease(ctx context.Context, a Actor, opts mailbox.LeaseOptions) (*mailbox.Lease, error) {
	if err := s.check(ctx, a); err != nil {
		return nil, err
	}
	opts.Self = a.Member
	l, err := s.Mailbox(a.Team).Lease(ctx, a.Member, opts)
	if err == nil {
		s.touch(ctx, a)
	}
	return l, err
}
