package team

import (
	"context"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/kv"
)

// Repair plans, and with apply carries out, the repair of the damaged
// records of team's state (kv.Store.Repair): each goes back to the newest
// earlier revision of its key that decodes, or is deleted when there is
// none. Every record written is logged in the team's event log as
// state.repaired. It is idempotent: with nothing damaged it does nothing.
// A team record without a good revision is refused (kv.RepairRefuse) and
// left as it is.
func (s *Service) Repair(ctx context.Context, team string, apply bool) ([]kv.RepairStep, error) {
	if err := teambus.ValidateID("team", team); err != nil {
		return nil, err
	}
	steps, err := s.store.Repair(ctx, team, apply)
	for _, st := range steps {
		if !st.Applied {
			continue
		}
		data := map[string]any{"key": st.Key, "revision": st.Revision, "reason": st.Reason, "action": st.Action}
		if st.Action == kv.RepairRestore {
			data["from_revision"], data["new_revision"] = st.From, st.NewRevision
		}
		s.LogEvent(ctx, team, eventlog.EvStateRepaired, "", data)
	}
	return steps, err
}
