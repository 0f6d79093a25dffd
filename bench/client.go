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
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", errNoGo
	}
	out, err := exec.CommandContext(ctx, goBin, "list", "-m", "-f", "{{.Path}} {{.Dir}}").Output()
	mod, root, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if err != nil || mod != "github.com/teambus/teambus" || root == "" {
		return "", errNoClientSource
	}
	if err := mkdir(dir); err != nil {
		return "", err
	}
	exe := filepath.Join(dir, "teambus-client")
	cmd := exec.CommandContext(ctx, goBin, "build", "-tags", "teambus_client,urfave_cli_no_docs", "-o", exe, "./cmd/teambus")
	cmd.Dir = root
	cmd.Env = append(proc.CleanEnv(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build teambus-client: %w: %s", err, strings.TrimSpace(string(b)))
	}
	return exe, nil
}
