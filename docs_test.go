package teambus_test

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The documentation is checked like code: README.md stays a front door,
// every relative link in README.md and docs/*.md leads to a file (and a
// heading) of this repository, no document cites what is not in it, and
// every package has its doc.go.

// readmeMaxLines is how long README.md may grow; the rest belongs in docs/.
const readmeMaxLines = 300

// forbidden are citations of things outside the repository and words of
// a development log, which docs and package comments must not contain.
var forbidden = []string{"§", "seed 0", "agent-wiring", "this round"}

func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	more, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append(files, more...)
}

func TestDocs_ReadmeIsShort(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, at most %d: move the details into docs/", n, readmeMaxLines)
	}
}

func TestDocs_NoCitationsOutsideTheRepository(t *testing.T) {
	files := docFiles(t)
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && d.Name() == "doc.go" {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, w := range forbidden {
				if strings.Contains(strings.ToLower(line), w) {
					t.Errorf("%s:%d: %q cites something outside this repository: %s", f, i+1, w, strings.TrimSpace(line))
				}
			}
		}
	}
}

// linkRE matches an inline Markdown link or image: [text](target) or
// [text](target "title").
var linkRE = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

func TestDocs_RelativeLinksResolve(t *testing.T) {
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := anchors[path]; ok {
			return a, nil
		}
		a, err := headingAnchors(path)
		if err != nil {
			return nil, err
		}
		anchors[path] = a
		return a, nil
	}
	checked := 0
	for _, f := range docFiles(t) {
		for _, l := range links(t, f) {
			target := l.target
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			if path == "" {
				path = f
			} else {
				path = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(f), path)))
			}
			checked++
			fi, err := os.Stat(path)
			if err != nil {
				t.Errorf("%s:%d: link %q: %v", f, l.line, target, err)
				continue
			}
			if anchor == "" {
				continue
			}
			if fi.IsDir() || !strings.HasSuffix(path, ".md") {
				t.Errorf("%s:%d: link %q: an anchor into %s, which is not a Markdown file", f, l.line, target, path)
				continue
			}
			a, err := anchorsOf(path)
			if err != nil {
				t.Fatal(err)
			}
			if !a[anchor] {
				t.Errorf("%s:%d: link %q: %s has no heading with the anchor #%s", f, l.line, target, path, anchor)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative links found: the link pattern is broken")
	}
}

type link struct {
	line   int
	target string
}

// links lists the inline links of a Markdown file outside code blocks and
// code spans.
func links(t *testing.T, path string) []link {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []link
	fenced := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(stripCodeSpans(line), -1) {
			out = append(out, link{line: n, target: m[1]})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// stripCodeSpans removes `code spans` from a line.
func stripCodeSpans(line string) string {
	var b strings.Builder
	in := false
	for _, r := range line {
		if r == '`' {
			in = !in
			continue
		}
		if !in {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// headingAnchors returns the anchors the code hosts give the headings of a
// Markdown file: lower case, punctuation but '-' and '_' removed, spaces
// as '-', and a repeated anchor numbered -1, -2, ….
func headingAnchors(path string) (map[string]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	seen := map[string]int{}
	out := map[string]bool{}
	fenced := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		slug := slugify(text)
		if n := seen[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out, nil
}

func slugify(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestDocs_EveryPackageHasDocGo(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if path != "." && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		entries, err := os.ReadDir(path)
		if err != nil {
			return err
		}
		hasGo, hasDoc := false, false
		for _, e := range entries {
			n := e.Name()
			if e.IsDir() || !strings.HasSuffix(n, ".go") {
				continue
			}
			if n == "doc.go" {
				hasDoc = true
			} else if !strings.HasSuffix(n, "_test.go") {
				hasGo = true
			}
		}
		if hasGo && !hasDoc {
			t.Errorf("package %s has no doc.go: say there what it owns", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
