package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

// message has the fields of a teambus message as the file-based peers
// store it, so the line is the same size as theirs.
type message struct {
	Seq   uint64          `json:"seq"`
	ID    string          `json:"id"`
	From  string          `json:"from"`
	To    string          `json:"to"`
	Type  string          `json:"type"`
	Body  string          `json:"body"`
	Data  json.RawMessage `json:"data"`
	Epoch int64           `json:"epoch"`
	TS    time.Time       `json:"ts"`
}

func main() {
	size := flag.Int("size", 1024, "body size in bytes")
	flag.Parse()
	if flag.NArg() != 1 || *size < 0 {
		fmt.Fprintln(os.Stderr, "usage: jsonl [--size N] FILE")
		os.Exit(2)
	}
	if err := appendLine(flag.Arg(0), *size); err != nil {
		fmt.Fprintf(os.Stderr, "jsonl: %v\n", err)
		os.Exit(1)
	}
}

// appendLine opens path O_APPEND|O_CREATE, writes one JSON line in one
// write and fsyncs it.
func appendLine(path string, size int) error {
	b, err := json.Marshal(message{Seq: 1, ID: "m1", From: "tm1", To: "tm2", Type: "info",
		Body: strings.Repeat("x", size), Epoch: 1, TS: time.Now().UTC()})
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
