package bench

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/teambus/teambus/proc"
)

// clientExe is the client build of teambus (see Config.ClientExe), found or
// built on first use.
func (r *run) clientExe(ctx context.Context) (string, error) {
	r.client.once.Do(func() { r.client.exe, r.client.err = findClient(ctx, r.cfg, filepath.Join(r.dir, "client")) })
	return r.client.exe, r.client.err
}

// errNoClientSource says why the client build could not be made.
var errNoClientSource = errors.New("no teambus-client beside the teambus binary and no teambus module source in the working directory to build it from (go build -tags teambus_client -o teambus-client ./cmd/teambus)")

func findClient(ctx context.Context, cfg Config, dir string) (string, error) {
	if cfg.ClientExe != "" {
		return cfg.ClientExe, nil
	}
	if c := filepath.Join(filepath.Dir(cfg.Exe), "teambus-client"); proc.IsExecutable(c) {
		return c, nil
	}
	return buildFromSource(ctx, dir, "teambus-client", "teambus_client,urfave_cli_no_docs", "./cmd/teambus", errNoClientSource)
}

// agentExe is what the SessionStart hook links $TEAMBUS_DIR/bin/teambus
// to: the lean agent build (cmd/teambus-agent) beside the client build or
// beside Exe, else built from the module source beside a client build of
// the source; the client build itself when neither can be had.
func (r *run) agentExe(ctx context.Context, client string) string {
	r.agent.once.Do(func() { r.agent.exe, r.agent.err = findAgent(ctx, r.cfg, client, filepath.Join(r.dir, "client")) })
	if r.agent.err != nil {
		r.log.Warn("bench: no lean agent build: the agent's teambus is the client build", "err", r.agent.err)
		return client
	}
	return r.agent.exe
}

// errNoAgentSource says why the lean agent build could not be made.
var errNoAgentSource = errors.New("no teambus-agent beside the teambus binary and no teambus module source in the working directory to build it from (go build -tags teambus_agent -o teambus-agent ./cmd/teambus-agent)")

func findAgent(ctx context.Context, cfg Config, client, dir string) (string, error) {
	for _, d := range []string{filepath.Dir(client), filepath.Dir(cfg.Exe)} {
		if c := filepath.Join(d, "teambus-agent"); proc.IsExecutable(c) {
			return c, nil
		}
	}
	if filepath.Dir(client) != dir {
		// Built here, it would hand what it does not run itself to a
		// client build it does not sit beside.
		c, err := buildFromSource(ctx, dir, "teambus-client", "teambus_client,urfave_cli_no_docs", "./cmd/teambus", errNoAgentSource)
		if err != nil {
			return "", err
		}
		dir = filepath.Dir(c)
	}
	return buildFromSource(ctx, dir, "teambus-agent", "teambus_agent,urfave_cli_no_docs", "./cmd/teambus-agent", errNoAgentSource)
}

// buildFromSource builds the package pkg of the teambus module in the
// working directory with tags, as dir/name; noSource when there is no
// module source to build from.
func buildFromSource(ctx context.Context, dir, name, tags, pkg string, noSource error) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", errNoGo
	}
	out, err := exec.CommandContext(ctx, goBin, "list", "-m", "-f", "{{.Path}} {{.Dir}}").Output()
	mod, root, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if err != nil || mod != "github.com/teambus/teambus" || root == "" {
		return "", noSource
	}
	if err := mkdir(dir); err != nil {
		return "", err
	}
	exe := filepath.Join(dir, name)
	cmd := exec.CommandContext(ctx, goBin, "build", "-tags", tags, "-o", exe, pkg)
	cmd.Dir = root
	cmd.Env = append(proc.CleanEnv(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %w: %s", name, err, strings.TrimSpace(string(b)))
	}
	return exe, nil
}
