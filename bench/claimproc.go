package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/proc"
	"github.com/teambus/teambus/team"
)

// Keys of the one-shot claim rows.
const (
	keyClaimProc     = "tb.claim.oneshot"
	keyClaimProcPeer = "peer.claim.oneshot"
)

// oneShotClaims is the claim row as users run it: ClaimProcWorkers agents
// at once, each taking work with one-shot processes — claim the next task,
// then complete it — from a team of ClaimProcTasks tasks, for
// ClaimProcDuration. teambus runs `teambus-client task next` and `task
// complete` with each member's own credential; the peer runs the
// standalone bench/peers/claim on a state.json under flock. An operation
// is one task claimed and completed (two processes).
func (r *run) oneShotClaims(ctx context.Context) error {
	workers, tasks, d := r.cfg.ClaimProcWorkers, r.cfg.ClaimProcTasks, r.cfg.ClaimProcDuration
	peerName := fmt.Sprintf("%d one-shot claimers of a flock'd state.json of %d tasks (standalone peer, bench/peers/claim): claim, then complete", workers, tasks)
	name := fmt.Sprintf("%d one-shot claimers (`teambus-client task next`, then `task complete`, member credentials), %d tasks", workers, tasks)
	if peer, err := r.claimPeer(ctx); err != nil {
		r.skippedRow("peer", keyClaimProcPeer, peerName, err)
	} else {
		state := filepath.Join(r.dir, "claims-state.json")
		if _, err := runOut(ctx, peer, "init", "--tasks", fmt.Sprint(tasks), state); err != nil {
			return err
		}
		s, err := claimLoop(ctx, workers, d, func(ctx context.Context, w int) (string, error) {
			out, err := runOut(ctx, peer, "next", "--member", fmt.Sprintf("c%d", w), state)
			return strings.TrimSpace(out), err
		}, func(ctx context.Context, w int, id string) error {
			_, err := runOut(ctx, peer, "complete", "--member", fmt.Sprintf("c%d", w), "--task", id, state)
			return err
		})
		if err != nil {
			return fmt.Errorf("claim peer: %w", err)
		}
		r.rateRow("peer", keyClaimProcPeer, peerName, s, "op = one task claimed and completed (two processes)").Short = "one-shot state.json claims"
	}

	nd, svc, stop, actors, err := r.claimTeam(ctx, "node-claim-oneshot", "claims", workers)
	if err != nil {
		return err
	}
	defer stop()
	members := make([]string, len(actors))
	for i, a := range actors {
		members[i] = a.Member
	}
	specs := make([]team.ImportTask, tasks)
	for i := range specs {
		specs[i] = team.ImportTask{Line: i + 1, TaskSpec: team.TaskSpec{ID: fmt.Sprintf("t%05d", i), Description: "task"}}
	}
	if _, err := svc.ImportTasks(ctx, "claims", specs, nil); err != nil {
		return fmt.Errorf("import %d tasks: %w", tasks, err)
	}
	creds := make([]string, workers)
	var client string
	for i, m := range members {
		if client, creds[i], err = r.clientKinds(ctx, nd, "claims", m); err != nil {
			r.skippedRow("teambus", keyClaimProc, name, err)
			return nil
		}
	}
	s, err := claimLoop(ctx, workers, d, func(ctx context.Context, w int) (string, error) {
		out, err := runOut(ctx, client, "task", "next", "--creds", creds[w], "--session", "s-"+members[w], "--json")
		if err != nil {
			return "", err
		}
		var t teambus.Task
		if err := json.Unmarshal([]byte(out), &t); err != nil {
			return "", fmt.Errorf("task next --json: %w: %q", err, out)
		}
		return t.ID, nil
	}, func(ctx context.Context, w int, id string) error {
		_, err := runOut(ctx, client, "task", "complete", id, "--creds", creds[w], "--session", "s-"+members[w])
		return err
	})
	if err != nil {
		return fmt.Errorf("one-shot claims: %w", err)
	}
	r.rateRow("teambus", keyClaimProc, name, s, "op = one task claimed and completed (two processes); every claim is a compare-and-set, losers retry")
	return nil
}

// errRetry is a claim that lost a race or found nothing available yet: the
// worker tries again.
var errRetry = errors.New("retry")

// claimLoop runs workers loops of claim then complete until d has passed
// and returns the tasks done and the time per task.
func claimLoop(ctx context.Context, workers int, d time.Duration, claim func(ctx context.Context, w int) (string, error), complete func(ctx context.Context, w int, id string) error) (sample, error) {
	var (
		mu    sync.Mutex
		lat   []time.Duration
		errs  []error
		wg    sync.WaitGroup
		start = time.Now()
		end   = start.Add(d)
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) && ctx.Err() == nil {
				t0 := time.Now()
				id, err := claim(ctx, w)
				if errors.Is(err, errRetry) {
					continue
				}
				if err == nil {
					err = complete(ctx, w, id)
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				mu.Lock()
				lat = append(lat, time.Since(t0))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return sample{}, errors.Join(errs...)
	}
	return sample{n: len(lat), elapsed: time.Since(start), lat: lat}, nil
}

// runOut runs exe and returns its stdout; exit 1 (transient: nothing
// available yet) and 3 (conflict: lost a race) are errRetry.
func runOut(ctx context.Context, exe string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = proc.CleanEnv()
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && (ee.ExitCode() == teambus.ExitTransient || ee.ExitCode() == teambus.ExitConflict) {
		return "", errRetry
	}
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", filepath.Base(exe), strings.Join(args[:min(len(args), 2)], " "), err, strings.TrimSpace(stderr.String()))
	}
	return out.String(), nil
}

// claimTeam starts a node named name with team teamID of workers joined
// members c0, c1, …; stop closes the node.
func (r *run) claimTeam(ctx context.Context, name, teamID string, workers int) (nd *node.Node, svc *team.Service, stop func(), actors []team.Actor, err error) {
	nd, svc, stop, err = r.teamNode(ctx, name, bus.SyncModeAlways, team.Config{})
	if err != nil {
		return nil, nil, nil, nil, err
	}
	members := make([]string, workers)
	for i := range members {
		members[i] = fmt.Sprintf("c%d", i)
	}
	if actors, err = sendTeam(ctx, svc, teamID, members...); err != nil {
		stop()
		return nil, nil, nil, nil, err
	}
	return nd, svc, stop, actors, nil
}
