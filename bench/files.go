package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/teambus/teambus"
)

// The file-based peers: what a team keeps on disk without a bus.

// body returns a message body of n bytes.
func body(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("x", n)
}

// fileMessage is a mailbox message as the peers store it: the same JSON
// as a teambus message, so both sides write the same bytes.
func fileMessage(seq int, size int) teambus.Message {
	return teambus.Message{Seq: uint64(seq), ID: fmt.Sprintf("m%d", seq), From: "tm1", To: "tm2", Type: teambus.MsgInfo,
		Body: body(size), Epoch: 1, TS: time.Now().UTC()}
}

// loop runs op until d has passed and at least minOps ran (or maxOps, when
// positive, is reached), timing each call.
func loop(ctx context.Context, d time.Duration, minOps, maxOps int, op func(i int) error) (sample, error) {
	var s sample
	start := time.Now()
	for i := 0; ; i++ {
		if err := ctx.Err(); err != nil {
			return s, err
		}
		if (time.Since(start) >= d && s.n >= minOps) || (maxOps > 0 && s.n >= maxOps) {
			break
		}
		t0 := time.Now()
		if err := op(i); err != nil {
			return s, err
		}
		s.lat = append(s.lat, time.Since(t0))
		s.n++
	}
	s.elapsed = time.Since(start)
	return s, nil
}

// meterFunc runs one measurement loop for d and returns what it did. A
// meter keeps its state (an open file) between calls, so loops of several
// meters can take turns.
type meterFunc func(ctx context.Context, d time.Duration) (sample, error)

// fsyncMeter writes 4 KiB blocks to one file, fsyncing after each: the
// disk's limit for durable writes one at a time. close releases the file.
func fsyncMeter(dir string) (m meterFunc, close func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, "fsync.dat"), os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, nil, err
	}
	block := bytes.Repeat([]byte{'x'}, 4096)
	return func(ctx context.Context, d time.Duration) (sample, error) {
		return loop(ctx, d, 1, 0, func(int) error {
			if _, err := f.Write(block); err != nil {
				return err
			}
			return f.Sync()
		})
	}, func() { f.Close() }, nil
}

// jsonlMeter appends one JSON line per message to an open file and fsyncs
// after each.
func jsonlMeter(dir string, size int) (m meterFunc, close func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, "mailbox.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, nil, err
	}
	seq := 0
	return func(ctx context.Context, d time.Duration) (sample, error) {
		return loop(ctx, d, 1, 0, func(int) error {
			seq++
			b, err := json.Marshal(fileMessage(seq, size))
			if err != nil {
				return err
			}
			if _, err := f.Write(append(b, '\n')); err != nil {
				return err
			}
			return f.Sync()
		})
	}, func() { f.Close() }, nil
}

// writeAtomic replaces path with b the careful way: a temporary file,
// fsync, rename over path, fsync of the directory.
func writeAtomic(path string, b []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// writeInbox writes an inbox file of n messages.
func writeInbox(path string, n, size int) error {
	msgs := make([]teambus.Message, n)
	for i := range msgs {
		msgs[i] = fileMessage(i+1, size)
	}
	b, err := json.Marshal(msgs)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// inboxMeter delivers one message into an inbox kept as a JSON array of
// n messages: read, parse, append, encode, write back atomically. The
// oldest message is dropped, as the reader would have taken it, so the
// inbox keeps its size.
func inboxMeter(dir string, n, size int) (meterFunc, error) {
	path := filepath.Join(dir, fmt.Sprintf("inbox-%d.json", n))
	if err := writeInbox(path, n, size); err != nil {
		return nil, err
	}
	seq := n
	return func(ctx context.Context, d time.Duration) (sample, error) {
		return loop(ctx, d, 1, 0, func(int) error {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			var msgs []teambus.Message
			if err := json.Unmarshal(b, &msgs); err != nil {
				return err
			}
			seq++
			msgs = append(msgs[1:], fileMessage(seq, size))
			if b, err = json.Marshal(msgs); err != nil {
				return err
			}
			return writeAtomic(path, b)
		})
	}, nil
}

// inboxReadAck drains an inbox file of n messages batch at a time: read,
// parse, take the oldest batch, write the rest back atomically. It returns
// one latency per batch.
func inboxReadAck(ctx context.Context, dir string, n, batch, size int) (sample, error) {
	path := filepath.Join(dir, "inbox-read.json")
	if err := writeInbox(path, n, size); err != nil {
		return sample{}, err
	}
	var s sample
	start := time.Now()
	for {
		if err := ctx.Err(); err != nil {
			return s, err
		}
		t0 := time.Now()
		b, err := os.ReadFile(path)
		if err != nil {
			return s, err
		}
		var msgs []teambus.Message
		if err := json.Unmarshal(b, &msgs); err != nil {
			return s, err
		}
		if len(msgs) == 0 {
			break
		}
		k := min(batch, len(msgs))
		s.n += k
		if b, err = json.Marshal(msgs[k:]); err != nil {
			return s, err
		}
		if err := writeAtomic(path, b); err != nil {
			return s, err
		}
		s.lat = append(s.lat, time.Since(t0))
	}
	s.elapsed = time.Since(start)
	return s, nil
}

// fileState is the state.json of the file-based peer: the team's members
// and tasks in one document.
type fileState struct {
	Team    teambus.Team      `json:"team"`
	Members []*teambus.Member `json:"members"`
	Tasks   []*teambus.Task   `json:"tasks"`
}

func newFileState(members, tasks int) *fileState {
	now := time.Now().UTC()
	st := &fileState{Team: teambus.Team{ID: "bench", Status: teambus.TeamActive, CreatedAt: now, Policy: teambus.DefaultPolicy()}}
	for i := 0; i < members; i++ {
		st.Members = append(st.Members, &teambus.Member{ID: fmt.Sprintf("m%d", i), Name: fmt.Sprintf("m%d", i), Role: "dev",
			Status: teambus.MemberIdle, Epoch: 1, Session: fmt.Sprintf("s%d", i), CreatedAt: now})
	}
	for i := 0; i < tasks; i++ {
		st.Tasks = append(st.Tasks, benchTask(i, members, now))
	}
	return st
}

// lockedUpdate runs fn on state.json under an exclusive flock, writing the
// result back atomically when fn says it changed.
func lockedUpdate(path string, fn func(*fileState) bool) error {
	lf, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lf.Close()
	for {
		err = syscall.Flock(int(lf.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		return err
	}
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var st fileState
	if err := json.Unmarshal(b, &st); err != nil {
		return err
	}
	if !fn(&st) {
		return nil
	}
	if b, err = json.Marshal(&st); err != nil {
		return err
	}
	return writeAtomic(path, b)
}

// stateClaims lets workers claim and complete every task of a state.json
// holding tasks available tasks, each step under flock with an atomic
// write: the peer of claims by contending members.
func stateClaims(ctx context.Context, dir string, tasks, workers int) (sample, error) {
	path := filepath.Join(dir, "state.json")
	st := newFileState(workers, 0)
	now := time.Now().UTC()
	for i := 0; i < tasks; i++ {
		t, _ := teambus.NewTask(fmt.Sprintf("t%05d", i), "task", nil, 0, "", nil, now)
		st.Tasks = append(st.Tasks, t)
	}
	b, err := json.Marshal(st)
	if err != nil {
		return sample{}, err
	}
	if err := writeAtomic(path, b); err != nil {
		return sample{}, err
	}
	var (
		done    atomic.Int64
		mu      sync.Mutex
		lat     []time.Duration
		wg      sync.WaitGroup
		firstEr error
	)
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(member string) {
			defer wg.Done()
			for ctx.Err() == nil {
				t0 := time.Now()
				var claimed string
				err := lockedUpdate(path, func(st *fileState) bool {
					for _, t := range st.Tasks {
						if t.Status == teambus.TaskAvailable {
							t.Status, t.AssignedTo, claimed = teambus.TaskInProgress, member, t.ID
							return true
						}
					}
					return false
				})
				if err == nil && claimed != "" {
					err = lockedUpdate(path, func(st *fileState) bool {
						for _, t := range st.Tasks {
							if t.ID == claimed {
								t.Status = teambus.TaskComplete
								return true
							}
						}
						return false
					})
				}
				if err != nil {
					mu.Lock()
					firstEr = errors.Join(firstEr, err)
					mu.Unlock()
					return
				}
				if claimed == "" {
					return
				}
				done.Add(1)
				mu.Lock()
				lat = append(lat, time.Since(t0))
				mu.Unlock()
			}
		}(fmt.Sprintf("m%d", w))
	}
	wg.Wait()
	if firstEr != nil {
		return sample{}, firstEr
	}
	return sample{n: int(done.Load()), elapsed: time.Since(start), lat: lat}, ctx.Err()
}

// writeMailboxJSONL writes n message lines to path: setup for the resume
// peer's tail read. It fsyncs at the end, so the kernel's writeback of a
// gigabyte does not run under the measurements that follow.
func writeMailboxJSONL(path string, n, size int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for i := 1; i <= n; i++ {
		b, err := json.Marshal(fileMessage(i, size))
		if err != nil {
			f.Close()
			return err
		}
		w.Write(b)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// resumePeer is what a file-based resume does: read and parse state.json,
// take over as lead (epoch up) and write it back atomically, and read the
// last 10 messages of the JSONL mailbox.
func resumePeer(statePath, mailboxPath string, session string) error {
	err := lockedUpdate(statePath, func(st *fileState) bool {
		st.Team.LeadSession = session
		st.Team.LeadEpoch++
		return true
	})
	if err != nil {
		return err
	}
	tail, err := tailLines(mailboxPath, 10)
	if err != nil {
		return err
	}
	for _, l := range tail {
		var m teambus.Message
		if err := json.Unmarshal(l, &m); err != nil {
			return err
		}
	}
	return nil
}

// tailLines returns the last n lines of a file, reading backwards from
// its end in 64 KiB steps.
func tailLines(path string, n int) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := fi.Size()
	var buf []byte
	for step := int64(64 << 10); ; step *= 2 {
		off := max(0, size-step)
		buf = make([]byte, size-off)
		if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		if bytes.Count(buf, []byte{'\n'}) > n || off == 0 {
			break
		}
	}
	lines := bytes.Split(bytes.TrimRight(buf, "\n"), []byte{'\n'})
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines, nil
}
