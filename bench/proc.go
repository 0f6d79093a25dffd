package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/teambus/teambus/proc"
)

// child is a process the bench started. It dies with the bench
// (Pdeathsig) and is killed by kill or stop.
type child struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// start runs exe with args, its output going to a log file in logs.
func start(logs, name, exe string, args ...string) (*child, error) {
	return startEnv(logs, name, exe, proc.CleanEnv(), args...)
}

// startEnv is start with the environment env.
func startEnv(logs, name, exe string, env []string, args ...string) (*child, error) {
	log := filepath.Join(logs, name+".log")
	f, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		f.Close()
		close(c.done)
	}()
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL and waits for the exit.
func (c *child) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

// stop sends SIGTERM, waits up to 5s, then kills.
func (c *child) stop() {
	if c.exited() {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		c.kill()
	}
}

// output returns the tail of the child's log.
func (c *child) output() string {
	b, _ := os.ReadFile(c.log)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// children tracks the processes of a phase so they all stop at its end.
type children []*child

func (cs *children) add(c *child) *child { *cs = append(*cs, c); return c }

func (cs children) killAll() {
	for _, c := range cs {
		if !c.exited() {
			c.kill()
		}
	}
}

// timeRun runs exe once and returns its wall time.
func timeRun(ctx context.Context, exe string, args ...string) (time.Duration, error) {
	return timeProc(ctx, exe, nil, nil, args...)
}

// timeProc runs exe once with env added to the child environment and
// stdin as its input, and returns its wall time: from the start of the
// fork until its exit is reaped.
func timeProc(ctx context.Context, exe string, env []string, stdin []byte, args ...string) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(proc.CleanEnv(), env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	t0 := time.Now()
	err := cmd.Run()
	d := time.Since(t0)
	if err != nil {
		return d, fmt.Errorf("%s %s: %v: %s", filepath.Base(exe), strings.Join(args[:min(len(args), 1)], " "), err, strings.TrimSpace(stderr.String()))
	}
	return d, nil
}

// rssMiB reads VmRSS of a process from /proc/PID/status.
func rssMiB(pid int) (float64, error) {
	return statusKiB(pid, "VmRSS:")
}

// rssSplit reads the anonymous (private heap and stacks) and file-backed
// (the binary's pages, shared with every other teambus process) parts of
// a process's RSS.
func rssSplit(pid int) (anon, file float64) {
	anon, _ = statusKiB(pid, "RssAnon:")
	file, _ = statusKiB(pid, "RssFile:")
	return anon, file
}

func statusKiB(pid int, field string) (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				return 0, err
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat times; 100 on every
// Linux architecture Go runs on.
const clockTicks = 100

// cpuTime reads the user plus system CPU time of a process from
// /proc/PID/stat; pid 0 is this process.
func cpuTime(pid int) (time.Duration, error) {
	path := fmt.Sprintf("/proc/%d/stat", pid)
	if pid == 0 {
		path = "/proc/self/stat"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces: fields start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	// After ')': state(3) ... utime(14) stime(15), so indexes 11 and 12.
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("malformed /proc stat times")
	}
	return time.Duration(u+s) * time.Second / clockTicks, nil
}

// machine describes the host: CPUs, CPU model, kernel, file system of dir.
func machine(dir string) Machine {
	m := Machine{Dir: dir}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/self/mounts"); err == nil {
		best := -1
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) < 3 {
				continue
			}
			mp := f[1]
			if (dir == mp || strings.HasPrefix(dir, strings.TrimSuffix(mp, "/")+"/")) && len(mp) > best {
				best, m.FS = len(mp), f[2]+" ("+f[0]+")"
			}
		}
	}
	return m
}
