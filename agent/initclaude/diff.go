package initclaude

import (
	"fmt"
	"strings"
)

// Diff returns a unified diff of a and b (whole files, 3 lines of context)
// labelled with path. Very large inputs are not diffed: then it returns b
// whole.
func Diff(path string, a, b []byte) string {
	x, y := lines(a), lines(b)
	if len(x)*len(y) > 4_000_000 {
		return fmt.Sprintf("+++ %s (new content)\n%s", path, b)
	}
	// lcs[i][j] is the length of the longest common subsequence of x[i:]
	// and y[j:].
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type op struct {
		kind byte // ' ', '-', '+'
		text string
		ai   int // line number in a (1-based) for ' ' and '-'
		bi   int // line number in b for ' ' and '+'
	}
	var ops []op
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			ops = append(ops, op{' ', x[i], i + 1, j + 1})
			i, j = i+1, j+1
		case i < len(x) && (j == len(y) || lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, op{'-', x[i], i + 1, j})
			i++
		default:
			ops = append(ops, op{'+', y[j], i, j + 1})
			j++
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "--- %s\n+++ %s (after)\n", path, path)
	const ctx = 3
	for k := 0; k < len(ops); {
		if ops[k].kind == ' ' {
			k++
			continue
		}
		// A hunk: from ctx lines before the change to ctx lines after the
		// last change that is at most 2*ctx lines from the previous one.
		start := max(0, k-ctx)
		end := k
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*ctx {
				end = min(len(ops), end+ctx)
				break
			}
			end = run
		}
		as, bs, an, bn := 0, 0, 0, 0
		for _, o := range ops[start:end] {
			if o.kind != '+' {
				if an == 0 {
					as = o.ai
				}
				an++
			}
			if o.kind != '-' {
				if bn == 0 {
					bs = o.bi
				}
				bn++
			}
		}
		fmt.Fprintf(&sb, "@@ -%d,%d +%d,%d @@\n", as, an, bs, bn)
		for _, o := range ops[start:end] {
			sb.WriteByte(o.kind)
			sb.WriteString(o.text)
			sb.WriteByte('\n')
		}
		k = end
	}
	return sb.String()
}

// lines splits data into lines without their newlines.
func lines(data []byte) []string {
	if len(data) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}
