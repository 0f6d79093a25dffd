package team

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/teamapi"
)

// Config holds the storage limits of new teams and the clock.
type Config struct {
	Mailbox mailbox.MailboxConfig
	KV      kv.Config
	// Events are the limits of new teams' event logs; replicas left at 0
	// follow the mailbox's.
	Events eventlog.EventsConfig
	// Logger, if set, receives what the service can not do without
	// failing the operation (an event it could not log); nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// MaxReply is the largest answer of the member API in bytes (as
	// JSON): a page of replay or inbox takes at most half of it, a team
	// view that would pass it shows its largest checkpoints clipped, and
	// what can not fit is refused (teamapi.ErrTooBig). 0 means the
	// connection's max payload less ReplyHeadroom (DefaultMaxReply when
	// the connection does not say).
	MaxReply int
	// SendQuotaWindow and SendQuotaShare set the send quota (quota.go):
	// within any window, a member stores at most 1/share of its team's
	// mailbox limit. 0 means DefaultQuotaWindow and DefaultQuotaShare; a
	// negative value turns the quota off.
	SendQuotaWindow time.Duration
	SendQuotaShare  int
}

// DefaultMaxReply is MaxReply when the connection does not give its max
// payload: the bus's default 1 MiB less ReplyHeadroom.
const DefaultMaxReply = 1<<20 - ReplyHeadroom

// ReplyHeadroom is the room an answer keeps within the bus's max payload
// for its subject, headers and envelope.
const ReplyHeadroom = 8 << 10

// pageBytes is the byte budget of one page of replay or inbox.
func (s *Service) pageBytes() int { return s.cfg.MaxReply / 2 }

// Service runs team operations against one bus connection.
type Service struct {
	js    jetstream.JetStream
	store *kv.Store
	cfg   Config
	// fullReads counts the claims that read the whole team (nextFull).
	fullReads atomic.Int64
	// quota counts what each member stored (quota.go).
	quota sendQuota
}

// New returns a service on js. It does no I/O.
//
// Replicas left at 0 in cfg.Mailbox and cfg.KV follow the cluster the
// connection is on (bus.AutoReplicas): three copies of every stream and
// bucket of a new team on a cluster of three nodes or more, else one.
func New(js jetstream.JetStream, cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxReply <= 0 {
		cfg.MaxReply = DefaultMaxReply
		if js != nil && js.Conn() != nil && js.Conn().MaxPayload() > 2*ReplyHeadroom {
			cfg.MaxReply = int(js.Conn().MaxPayload()) - ReplyHeadroom
		}
	}
	if cfg.Mailbox.Replicas == 0 || cfg.KV.Replicas == 0 {
		r := bus.AutoReplicas(js.Conn())
		if cfg.Mailbox.Replicas == 0 {
			cfg.Mailbox.Replicas = r
		}
		if cfg.KV.Replicas == 0 {
			cfg.KV.Replicas = r
		}
	}
	if cfg.Events.Replicas == 0 {
		cfg.Events.Replicas = cfg.Mailbox.Replicas
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.KV.Now = cfg.Now
	if cfg.KV.Logger == nil {
		cfg.KV.Logger = cfg.Logger
	}
	cfg.KV.Board = BoardLayout()
	return &Service{js: js, store: kv.New(js, cfg.KV), cfg: cfg}
}

// Store returns the state store, for tests that inspect the records. A
// caller outside package team reads through the views (views.go: Team,
// Member, Task, Snapshot, Heartbeats, ListTeams, JetStream) and changes
// state only through the service's methods, which apply the rules.
func (s *Service) Store() *kv.Store { return s.store }

// Mailbox returns the mailbox of team with the service's limits, for
// tests that inspect the stream. Outside package team mail is read with
// ReplayMail, MailTail, Inbox and LeaseInbox.
func (s *Service) Mailbox(team string) *mailbox.Mailbox {
	return mailbox.NewMailbox(s.js, team, s.cfg.Mailbox)
}

// teamMailbox returns the mailbox of t with the body limit stored with it.
func (s *Service) teamMailbox(t *teambus.Team) *mailbox.Mailbox {
	cfg := s.cfg.Mailbox
	if t.MaxBody > 0 {
		cfg.MaxBody = t.MaxBody
	}
	return mailbox.NewMailbox(s.js, t.ID, cfg)
}

// Now returns the service clock in UTC.
func (s *Service) Now() time.Time { return s.cfg.Now().UTC() }

// Actor is who runs a command: a member of a team, or the lead, in a
// session. It is the member API's actor.
type Actor = teamapi.Actor

// authorize checks that the actor may act in snap's team now and returns
// the incarnation epoch it acts as.
func authorize(snap *kv.Snapshot, a Actor) (int64, error) {
	t := snap.Team
	if t.Closed() {
		return 0, teambus.Statef("team %s is %s: use `teambus team review %s`", t.ID, t.Status, t.ID)
	}
	if a.IsLead() {
		if t.LeadSession != "" && a.Session != t.LeadSession {
			return 0, &StaleLeadError{Team: t.ID, Session: a.Session, Epoch: t.LeadEpoch}
		}
		return t.LeadEpoch, nil
	}
	m, err := snap.Member(a.Member)
	if err != nil {
		return 0, err
	}
	if err := m.Fenced(a.Session); err != nil {
		return 0, err
	}
	return m.Epoch, nil
}

// MemberSpec describes a member at team creation: ID[:ROLE[:QUANTUM]].
type MemberSpec struct {
	ID, Role, Quantum string
}

// ParseMemberSpec parses ID[:ROLE[:QUANTUM]].
func ParseMemberSpec(s string) (MemberSpec, error) {
	parts := strings.SplitN(s, ":", 3)
	spec := MemberSpec{ID: parts[0]}
	if err := teambus.ValidateMemberID(spec.ID); err != nil {
		return spec, err
	}
	if len(parts) > 1 {
		spec.Role = parts[1]
		if len(spec.Role) > 64 || !teambus.Printable(spec.Role) {
			return spec, teambus.Invalidf("invalid role %q for member %s: at most 64 characters on one line", spec.Role, spec.ID)
		}
	}
	if len(parts) > 2 && parts[2] != "" {
		spec.Quantum = parts[2]
		if err := teambus.ValidateID("quantum", spec.Quantum); err != nil {
			return spec, err
		}
	}
	return spec, nil
}

// CreateTeam creates a team with its policy and members, its state
// buckets, mailbox and the members' inboxes. leadSession may be empty: the
// first `teambus lead` then attaches as lead.
func (s *Service) CreateTeam(ctx context.Context, id, leadSession string, members []MemberSpec, policy teambus.Policy) (*teambus.Team, error) {
	if err := teambus.ValidateID("team", id); err != nil {
		return nil, err
	}
	if leadSession != "" {
		if err := teambus.ValidateSession(leadSession); err != nil {
			return nil, err
		}
	}
	if err := policy.Validate(); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, m := range members {
		if err := teambus.ValidateMemberID(m.ID); err != nil {
			return nil, err
		}
		if seen[m.ID] {
			return nil, teambus.Invalidf("member %s is listed twice", m.ID)
		}
		seen[m.ID] = true
	}
	if ok, err := s.store.TeamExists(ctx, id); err != nil {
		return nil, err
	} else if ok {
		return nil, teambus.Statef("team %s already exists: pick another id, or see `teambus team show %s`", id, id)
	}
	t, err := s.createTeam(ctx, id, leadSession, members, policy, seen)
	if err != nil && !errors.Is(err, teambus.ErrState) {
		// A failed create leaves nothing behind. Not on ErrState: that is
		// a concurrent create of the same id, whose team is not ours.
		s.undoCreate(ctx, id)
		return nil, s.createErr(id, err)
	}
	return t, err
}

func (s *Service) createTeam(ctx context.Context, id, leadSession string, members []MemberSpec, policy teambus.Policy, seen map[string]bool) (*teambus.Team, error) {
	now := s.Now()
	mb := s.Mailbox(id)
	if err := mb.Declare(ctx); err != nil {
		return nil, err
	}
	if err := s.Events(id).Declare(ctx); err != nil {
		return nil, err
	}
	t := &teambus.Team{ID: id, Status: teambus.TeamPending, CreatedAt: now, LeadSession: leadSession, Policy: policy, UpdatedAt: now, MaxBody: mb.Config().MaxBody}
	var recs []*teambus.Member
	for _, m := range members {
		recs = append(recs, &teambus.Member{ID: m.ID, Name: m.ID, Role: m.Role, Quantum: m.Quantum, Status: teambus.MemberSpawned, CreatedAt: now, UpdatedAt: now})
	}
	if err := s.store.CreateTeam(ctx, t, recs); err != nil {
		return nil, err
	}
	// After the state bucket, which holds recipient records: on defaults
	// there are none to write, and the recipients' consumers are made when
	// first read (mailbox.Mailbox.AddRecipient).
	if err := mb.AddRecipients(ctx, append([]string{teambus.Lead}, keys(seen)...), policy.AckWait); err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(members))
	for _, m := range members {
		ids = append(ids, m.ID)
	}
	s.LogEvent(ctx, id, eventlog.EvSessionStart, "", map[string]any{"command": "team.create", "team": id, "members": ids, "lead_session": leadSession})
	return t, nil
}

// AddMember adds a member to an existing team.
func (s *Service) AddMember(ctx context.Context, team string, spec MemberSpec) (*teambus.Member, error) {
	snap, err := s.store.Snapshot(ctx, team)
	if err != nil {
		return nil, err
	}
	if snap.Team.Closed() {
		return nil, teambus.Statef("team %s is %s: no new members", team, snap.Team.Status)
	}
	if _, ok := snap.Members[spec.ID]; ok {
		return nil, teambus.Statef("team %s already has a member %s", team, spec.ID)
	}
	if _, err := snap.Member(spec.ID); errors.Is(err, kv.ErrDamaged) {
		return nil, err // its record exists, damaged
	}
	if err := s.Mailbox(team).AddRecipient(ctx, spec.ID, snap.Team.Policy.AckWait); err != nil {
		return nil, err
	}
	now := s.Now()
	m := &teambus.Member{ID: spec.ID, Name: spec.ID, Role: spec.Role, Quantum: spec.Quantum, Status: teambus.MemberSpawned, CreatedAt: now}
	if _, err := s.store.PutMember(ctx, team, m, 0); err != nil {
		return nil, fmt.Errorf("add member %s: %w", spec.ID, err)
	}
	return m, nil
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// touch records the actor's activity; a failure is not the command's.
func (s *Service) touch(ctx context.Context, a Actor) {
	if a.IsLead() {
		return
	}
	_ = s.store.Touch(ctx, a.Team, a.Member) // advisory: a lost activity stamp makes the lead probe a little early
}
