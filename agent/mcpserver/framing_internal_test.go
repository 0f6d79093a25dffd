package mcpserver

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// The filter answers bad lines and passes good ones, in order, for lines
// far past its buffer and past its limit.
func TestRequestFilter_Lines(t *testing.T) {
	good := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	long := `{"jsonrpc":"2.0","id":2,"method":"x","params":{"p":"` + strings.Repeat("y", 300<<10) + `"}}`
	in := strings.Join([]string{`{not json`, strings.Repeat("z", 1<<20), good, "", long, `[]`, good}, "\n") + "\n"
	pr, pw := io.Pipe()
	go func() {
		b := []byte(in)
		for len(b) > 0 { // small writes, as a pipe delivers them
			n := min(len(b), 4093)
			pw.Write(b[:n])
			b = b[n:]
		}
		pw.Close()
	}()
	var out bytes.Buffer
	f := newRequestFilter(pr, &out, nil, 512<<10)
	got, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	if want := good + "\n" + long + "\n" + good + "\n"; string(got) != want {
		t.Errorf("passed %d bytes, want %d", len(got), len(want))
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "-32700") || !strings.Contains(lines[1], "-32600") || !strings.Contains(lines[2], "-32600") {
		t.Errorf("answers:\n%s", out.String())
	}
}
