package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestSendFrom: `send --from FILE` refuses a file with a bad line (exit
// 2, the line named, nothing sent, even when the bad line is in the last
// request), sends a good file of 1,200 messages in order with consecutive
// seqs, stores nothing twice when the file is sent again, and reads stdin.
func TestSendFrom(t *testing.T) {
	t.Parallel()
	dir := evTeam(t, "sf")
	base := append([]string{"--team", "sf", "--member", "tm1"}, dir...)
	file := filepath.Join(t.TempDir(), "mail.jsonl")
	to := []string{`"to":"tm2",`, ``, `"to":"all","type":"report",`}
	lines := make([]string, 1200)
	for i := range lines {
		lines[i] = fmt.Sprintf(`{%s"body":"message %d","data":{"i":%d}}`, to[i%3], i, i)
	}
	write := func(lines []string) {
		if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stored := func() int {
		out := evOK(t, append([]string{"replay", "--team", "sf", "--json"}, dir...)...)
		return strings.Count(out, "\n")
	}
	bad := func(i int, line string) []string {
		l := append([]string(nil), lines...)
		l[i-1] = line
		return l
	}
	refused := []struct {
		lines []string
		parts []string
	}{
		{bad(1150, `{"to":"ghost","body":"x"}`), []string{"line 1150", "ghost", "nothing sent"}},
		{bad(3, `{"body":"x"`), []string{"line 3", "not a message"}},
		{bad(7, `{"body":"x","form":"tm2"}`), []string{"line 7", `unknown field "form"`}},
		{bad(9, `{"body":"x","type":"gossip"}`), []string{"line 9", "message type"}},
		{bad(1200, `{"body":"x","to":"tm1"}`), []string{"line 1200", "tm1 can not send mail to itself"}},
		{bad(10, `{"body":"x","id":"two words"}`), []string{"line 10", "message id"}},
		{bad(11, `{"body":"`+strings.Repeat("b", 256<<10+1)+`"}`), []string{"line 11", "at most 262144"}},
		{bad(12, `{"body":"x","to":"tm2","type":"shutdown_request"}`), []string{"line 12", "only the lead"}},
	}
	for _, tt := range refused {
		write(tt.lines)
		runCLI(t, append([]string{"send", "--from", file}, base...)...).wantError(t, 2, tt.parts...)
	}
	runCLI(t, append([]string{"send", "--from", file, "hello"}, base...)...).wantError(t, 2, "no BODY argument")
	runCLI(t, append([]string{"send", "--from", file, "--to", "tm2"}, base...)...).wantError(t, 2, "--to with --from")
	runCLI(t, append([]string{"send", "--from", file + ".missing"}, base...)...).wantError(t, 2, "no such file")
	if n := stored(); n != 0 {
		t.Fatalf("%d messages stored by refused sends, want 0", n)
	}

	write(lines)
	out := evOK(t, append([]string{"send", "--from", file}, base...)...)
	m := regexp.MustCompile(`^stored 1200 messages \(0 duplicate\), seq (\d+)\.\.(\d+)\n$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("send --from printed %q", out)
	}
	first, _ := strconv.Atoi(m[1])
	last, _ := strconv.Atoi(m[2])
	if last-first != 1199 {
		t.Fatalf("seqs %d..%d, want 1200 consecutive", first, last)
	}
	type replayed struct {
		Seq  int            `json:"seq"`
		From string         `json:"from"`
		To   string         `json:"to"`
		Body string         `json:"body"`
		Data map[string]int `json:"data"`
	}
	var got []replayed
	for _, l := range strings.Split(strings.TrimSpace(evOK(t, append([]string{"replay", "--team", "sf", "--json"}, dir...)...)), "\n") {
		var msg replayed
		if err := json.Unmarshal([]byte(l), &msg); err != nil {
			t.Fatalf("replay line %q: %v", l, err)
		}
		got = append(got, msg)
	}
	if len(got) != 1200 {
		t.Fatalf("%d messages stored, want 1200", len(got))
	}
	for i, msg := range got {
		wantTo := []string{"tm2", "lead", "all"}[i%3]
		if msg.Seq != first+i || msg.From != "tm1" || msg.To != wantTo || msg.Body != fmt.Sprintf("message %d", i) || msg.Data["i"] != i {
			t.Fatalf("message %d = %+v, want line %d at seq %d", i, msg, i+1, first+i)
		}
	}

	// Sent again (a re-run after a crash): every message is a duplicate.
	out = evOK(t, append([]string{"send", "--from", file}, base...)...)
	if want := fmt.Sprintf("stored 1200 messages (1200 duplicate), seq %d..%d\n", first, last); out != want {
		t.Fatalf("re-sent file printed %q, want %q", out, want)
	}
	if n := stored(); n != 1200 {
		t.Fatalf("%d messages stored after the re-run, want 1200", n)
	}

	// stdin, --json: line 1 is line 1 of the file (a duplicate), line 2
	// is new.
	r := runTestStdin(t, lines[0]+"\n"+`{"to":"tm2","body":"from stdin","id":"stdin-1"}`+"\n",
		append([]string{"send", "--from", "-", "--json"}, base...)...)
	if r.code != 0 {
		t.Fatalf("send --from -: exit %d: %s", r.code, r.stderr)
	}
	type sent struct {
		Seq       int    `json:"seq"`
		ID        string `json:"id"`
		Duplicate bool   `json:"duplicate"`
		Line      int    `json:"line"`
	}
	var res []sent
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var x sent
		if err := json.Unmarshal([]byte(l), &x); err != nil {
			t.Fatalf("--json line %q: %v", l, err)
		}
		res = append(res, x)
	}
	if len(res) != 2 || !res[0].Duplicate || res[0].Seq != first || res[1].Duplicate || res[1].ID != "stdin-1" || res[1].Seq != last+1 || res[1].Line != 2 {
		t.Fatalf("send --from - --json = %+v (stdout %q)", res, r.stdout)
	}
	if n := stored(); n != 1201 {
		t.Fatalf("%d messages stored, want 1201", n)
	}
}
