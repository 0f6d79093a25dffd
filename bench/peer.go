package bench

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/teambus/teambus/proc"
)

// jsonlPeerSource is bench/peers/jsonl, the standalone one-shot peer: a
// user's own small program, never the teambus binary re-executed.
//
//go:embed peers/jsonl/main.go
var jsonlPeerSource []byte

// claimPeerSource is bench/peers/claim, the standalone one-shot claimer of
// a flock'd state.json.
//
//go:embed peers/claim/main.go
var claimPeerSource []byte

// errNoGo says the peer could not be built because there is no Go
// toolchain; the rows that need it are skipped, not failed.
var errNoGo = errors.New("no go toolchain to build the peer")

// peerBuild builds the peer at most once per run.
type peerBuild struct {
	once sync.Once
	exe  string
	err  error
}

// jsonlPeer returns the path of the one-shot JSONL peer, built on first
// use into the run's directory from the embedded source with the go
// command on PATH (standard library only: no module download). The error
// is errNoGo when there is no go command.
func (r *run) jsonlPeer(ctx context.Context) (string, error) {
	r.peer.once.Do(func() {
		r.peer.exe, r.peer.err = buildPeer(ctx, filepath.Join(r.dir, "peer-jsonl"), "jsonl", jsonlPeerSource)
	})
	return r.peer.exe, r.peer.err
}

// claimPeer returns the path of the one-shot claim peer, built on first
// use as jsonlPeer is.
func (r *run) claimPeer(ctx context.Context) (string, error) {
	r.claimer.once.Do(func() {
		r.claimer.exe, r.claimer.err = buildPeer(ctx, filepath.Join(r.dir, "peer-claim"), "claim", claimPeerSource)
	})
	return r.claimer.exe, r.claimer.err
}

// buildPeer builds the standalone program source (one main.go, standard
// library only) as dir/name.
func buildPeer(ctx context.Context, dir, name string, source []byte) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		if root := os.Getenv("GOROOT"); root != "" {
			goBin, err = exec.LookPath(filepath.Join(root, "bin", "go"))
		}
		if err != nil {
			return "", errNoGo
		}
	}
	if err := mkdir(dir); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), source, 0o600); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module "+name+"peer\n\ngo 1.22\n"), 0o600); err != nil {
		return "", err
	}
	exe := filepath.Join(dir, name)
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", exe, ".")
	cmd.Dir = dir
	cmd.Env = append(proc.CleanEnv(), "GOWORK=off", "GOFLAGS=", "GOTOOLCHAIN=local", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the %s peer: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	return exe, nil
}

// skippedRow is a row of the JSONL peer that could not be measured, with
// the reason; the teambus rows beside it are still measured, and their
// ratios to it are not given. A peer that failed to build for another
// reason than a missing toolchain is also a warning of the run.
func (r *run) skippedRow(group, key, name string, err error) {
	r.res.add(Row{Group: group, Key: key, Name: name, Unit: UnitMs, Skipped: true, Note: "skipped: " + err.Error()})
	r.cfg.Progress("  %s: skipped: %v", name, err)
	if !errors.Is(err, errNoGo) {
		r.res.Warnings = append(r.res.Warnings, fmt.Sprintf("%s: %v", key, err))
	}
}
