package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// task has the fields of a teambus task record as a file-based tool would
// keep them, so the file is the size of theirs.
type task struct {
	ID           string     `json:"id"`
	Description  string     `json:"description"`
	Priority     int        `json:"priority"`
	Dependencies []string   `json:"dependencies"`
	Status       string     `json:"status"`
	AssignedTo   string     `json:"assigned_to"`
	Attempts     int        `json:"attempts"`
	Failures     int        `json:"failures"`
	Crashes      int        `json:"crashes"`
	Checkpoint   any        `json:"checkpoint"`
	CreatedAt    time.Time  `json:"created_at"`
	UpdatedAt    time.Time  `json:"updated_at"`
	StartedAt    *time.Time `json:"started_at"`
	CompletedAt  *time.Time `json:"completed_at"`
}

type state struct {
	Tasks []*task `json:"tasks"`
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	member := fs.String("member", "", "member id")
	id := fs.String("task", "", "task id (complete)")
	n := fs.Int("tasks", 0, "tasks to write (init)")
	_ = fs.Parse(os.Args[2:])
	if fs.NArg() != 1 {
		usage()
	}
	path := fs.Arg(0)
	var err error
	switch os.Args[1] {
	case "init":
		now := time.Now().UTC()
		st := &state{}
		for i := 0; i < *n; i++ {
			st.Tasks = append(st.Tasks, &task{ID: fmt.Sprintf("t%05d", i), Description: "task", Dependencies: []string{}, Status: "pending", CreatedAt: now, UpdatedAt: now})
		}
		err = write(path, st)
	case "next":
		err = locked(path, func(st *state) (bool, error) {
			now := time.Now().UTC()
			for _, t := range st.Tasks {
				if t.AssignedTo == *member && t.Status == "in_progress" {
					return false, fmt.Errorf("%s already works on task %s", *member, t.ID)
				}
			}
			for _, t := range st.Tasks {
				if t.Status == "pending" {
					t.Status, t.AssignedTo, t.Attempts, t.StartedAt, t.UpdatedAt = "in_progress", *member, t.Attempts+1, &now, now
					fmt.Println(t.ID)
					return true, nil
				}
			}
			return false, errors.New("no task left")
		})
	case "complete":
		err = locked(path, func(st *state) (bool, error) {
			now := time.Now().UTC()
			for _, t := range st.Tasks {
				if t.ID == *id {
					if t.AssignedTo != *member || t.Status != "in_progress" {
						return false, fmt.Errorf("task %s is not %s's", t.ID, *member)
					}
					t.Status, t.CompletedAt, t.UpdatedAt = "complete", &now, now
					return true, nil
				}
			}
			return false, fmt.Errorf("no task %s", *id)
		})
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "claim:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: claim next|complete|init [--member M] [--task ID] [--tasks N] FILE")
	os.Exit(2)
}

// locked runs fn on the state under an exclusive flock and writes the state
// back when fn changed it.
func locked(path string, fn func(*state) (bool, error)) error {
	lf, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lf.Close()
	for {
		if err = syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		return err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return err
	}
	changed, err := fn(&st)
	if err != nil || !changed {
		return err
	}
	return write(path, &st)
}

// write replaces path atomically: temporary file, fsync, rename, fsync of
// the directory.
func write(path string, st *state) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
