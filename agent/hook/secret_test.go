package hook

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/teambus/teambus/agent/binding"
	"github.com/teambus/teambus/bus/bustest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	bustest.RemoveBinary()
	os.Exit(code)
}

// TestSessionStart_NoSecretInArgv: the real teambus binary runs
// `hook SessionStart` with the operator token given as a flag (and, in
// the second case, in the environment); the sidecar it starts registers
// with the bus, and no process on the machine — the sidecar least of all —
// carries the token in its argv (/proc/<pid>/cmdline).
func TestSessionStart_NoSecretInArgv(t *testing.T) {
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		t.Skip("no /proc")
	}
	bin := bustest.Binary(t)
	for _, via := range []string{"flag", "env"} {
		t.Run(via, func(t *testing.T) {
			r := newRig(t)
			token := r.node.Token()
			if len(token) < 16 {
				t.Fatalf("the node has no token to leak: %q", token)
			}
			args := []string{"hook", "SessionStart", "--team", "alpha", "--member", "tm1", "--dir", r.state, "--server", r.node.URL()}
			env := []string{"CLAUDE_PID=" + strconv.Itoa(r.pid()), "HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
			if via == "flag" {
				args = append(args, "--token", token)
			} else {
				env = append(env, "TEAMBUS_TOKEN="+token)
			}
			cmd := exec.Command(bin, args...)
			cmd.Env = env
			cmd.Stdin = bytes.NewReader(r.payload("SessionStart.real-2.1.330.json", nil))
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Run(); err != nil {
				t.Fatalf("hook: %v: %s", err, errb.String())
			}
			if !strings.Contains(out.String(), "this session is member tm1") {
				t.Fatalf("not bound: %s\nlog:\n%s", out.String(), r.hookLog())
			}
			b, err := binding.Load(r.state, r.pid())
			if err != nil || b.SidecarPID <= 0 {
				t.Fatalf("no sidecar recorded: %+v %v\nlog:\n%s", b, err, r.hookLog())
			}
			pid := b.SidecarPID
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
			// The sidecar reaches the bus with the token from its
			// environment: it registers (adopts) the incarnation.
			logPath := filepath.Join(r.state, "logs", "alpha", "tm1-e1.log")
			deadline := time.Now().Add(30 * time.Second)
			for {
				l, _ := os.ReadFile(logPath)
				if bytes.Contains(l, []byte("teammate registered")) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the sidecar did not register within 30s; its log:\n%s", l)
				}
				time.Sleep(50 * time.Millisecond)
			}
			argv, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if err != nil {
				t.Fatalf("sidecar %d: %v", pid, err)
			}
			if !bytes.Contains(argv, []byte("teammate")) {
				t.Fatalf("pid %d is not the sidecar: %q", pid, argv)
			}
			// Every process that can be read, not only the sidecar.
			procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
			for _, p := range procs {
				raw, err := os.ReadFile(p)
				if err == nil && bytes.Contains(raw, []byte(token)) {
					t.Errorf("%s carries the token in argv: %q", p, bytes.ReplaceAll(raw, []byte{0}, []byte{' '}))
				}
			}
		})
	}
}

// TestSessionStart_PathPutsClientBuildFirst: the exports SessionStart
// writes into CLAUDE_ENV_FILE put $TEAMBUS_DIR/bin first on PATH, where
// `teambus` is the fastest build beside the hook's binary — the lean
// agent build when it is there, else the client build: a shell that
// sources the file (twice, as a shell may) runs it for `teambus`, and
// PATH holds the directory once.
func TestSessionStart_PathPutsClientBuildFirst(t *testing.T) {
	for _, tt := range []struct {
		builds []string
		want   string
	}{
		{[]string{"teambus", "teambus-client"}, "teambus-client"},
		{[]string{"teambus", "teambus-client", "teambus-agent"}, "teambus-agent"},
		{[]string{"teambus", "teambus-agent"}, "teambus-agent"},
	} {
		t.Run(tt.want+"-of-"+strings.Join(tt.builds, ","), func(t *testing.T) {
			r := newRig(t)
			envFile := filepath.Join(t.TempDir(), "sessionstart-hook-0.sh")
			r.env["CLAUDE_ENV_FILE"] = envFile
			r.env["TEAMBUS_NO_SIDECAR"] = "1"
			binDir := t.TempDir()
			for _, name := range tt.builds {
				if err := os.WriteFile(filepath.Join(binDir, name), []byte("#!/bin/sh\necho "+name+"\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			cfg := r.config("SessionStart")
			cfg.Exe = filepath.Join(binDir, "teambus")
			res := r.run(cfg, bytes.NewReader(r.payload("SessionStart.real-2.1.330.json", nil)))
			if !strings.Contains(res.context(t, "SessionStart"), "this session is member tm1") {
				t.Fatalf("not bound: %+v\n%s", res, r.hookLog())
			}
			script := fmt.Sprintf(". %q; . %q; teambus; echo \"$PATH\"", envFile, envFile)
			cmd := exec.Command("/bin/sh", "-c", script)
			cmd.Env = []string{"PATH=/usr/bin:/bin"}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("sh: %v: %s", err, out)
			}
			shim := filepath.Join(r.state, ShimDir)
			if want := tt.want + "\n" + shim + ":/usr/bin:/bin\n"; string(out) != want {
				t.Fatalf("after sourcing the exports twice: %q, want %q", out, want)
			}
			if l, err := os.Readlink(filepath.Join(shim, "teambus")); err != nil || l != filepath.Join(binDir, tt.want) {
				t.Fatalf("shim link %q %v", l, err)
			}
		})
	}
}

// TestMCPSidecar_NoSecretInArgv: `teambus mcp --join --sidecar` given the
// token as a flag starts a teammate sidecar that reaches the bus with it
// (it registers) and carries it in its environment, not its argv.
func TestMCPSidecar_NoSecretInArgv(t *testing.T) {
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		t.Skip("no /proc")
	}
	bin := bustest.Binary(t)
	r := newRig(t)
	token := r.node.Token()
	cmd := exec.Command(bin, "mcp", "--join", "--sidecar", "--team", "alpha", "--member", "tm2", "--dir", r.state,
		"--server", r.node.URL(), "--token", token)
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	var errb bytes.Buffer
	cmd.Stdin, cmd.Stderr = bytes.NewReader(nil), &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("mcp: %v: %s", err, errb.String())
	}
	var pid int
	for _, f := range strings.Fields(errb.String()) {
		if v, ok := strings.CutPrefix(f, "pid="); ok {
			pid, _ = strconv.Atoi(v)
		}
	}
	if pid <= 0 {
		t.Fatalf("no sidecar pid in the log:\n%s", errb.String())
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	logs, _ := filepath.Glob(filepath.Join(r.state, "logs", "alpha", "tm2-e*.log"))
	deadline := time.Now().Add(30 * time.Second)
	for registered := false; !registered; {
		for _, p := range logs {
			l, _ := os.ReadFile(p)
			registered = registered || bytes.Contains(l, []byte("teammate registered"))
		}
		if time.Now().After(deadline) {
			t.Fatalf("the mcp sidecar did not register within 30s (logs %v)", logs)
		}
		time.Sleep(50 * time.Millisecond)
		logs, _ = filepath.Glob(filepath.Join(r.state, "logs", "alpha", "tm2-e*.log"))
	}
	argv, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !bytes.Contains(argv, []byte("teammate")) {
		t.Fatalf("pid %d is not the sidecar: %q %v", pid, argv, err)
	}
	if bytes.Contains(argv, []byte(token)) {
		t.Errorf("the mcp sidecar carries the token in argv: %q", argv)
	}
}
