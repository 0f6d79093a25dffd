package bench

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Units of a row's value. Rates are better higher, times and sizes lower.
const (
	UnitRate    = "op/s"
	UnitMs      = "ms"
	UnitMiB     = "MiB"
	UnitPct     = "% of a core"
	UnitOverdue = "s over timeout"
)

// Row is one measured figure.
type Row struct {
	// Group is limit, peer, teambus, resume, detection, memory or scale.
	Group string `json:"group"`
	// Key names the row for comparisons and targets, e.g. "tb.send.async".
	Key  string `json:"key"`
	Name string `json:"name"`
	// Short names the row in other rows' ratios.
	Short string `json:"short,omitempty"`
	// Value is the headline figure in Unit: a rate, a median time, a size,
	// a CPU share, or for detection the p99 delay past the timeout.
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	// P50 and P99 are per-operation latencies in milliseconds, or for
	// detection the delay past the timeout in seconds.
	P50 float64 `json:"p50,omitempty"`
	P99 float64 `json:"p99,omitempty"`
	// N is how many operations or trials the figure comes from.
	N int `json:"n"`
	// Vs compares the row with the peers it replaces.
	Vs []Ratio `json:"vs,omitempty"`
	// Note says what the row's conditions were.
	Note string `json:"note,omitempty"`
	// Skipped is set when the row could not be measured; Note says why.
	Skipped bool `json:"skipped,omitempty"`
}

// Ratio is a teambus figure divided by a peer's figure in the same unit:
// for rates more is better, for times less is.
type Ratio struct {
	Peer  string  `json:"peer"`
	Name  string  `json:"name"`
	Ratio float64 `json:"ratio"`
}

// Target is a goal of the issue, checked against this run.
type Target struct {
	Text  string `json:"text"`
	Got   string `json:"got"`
	Holds bool   `json:"holds"`
	// Skipped is set when a row the target needs was not measured.
	Skipped bool `json:"skipped,omitempty"`
}

// Machine describes where the run happened.
type Machine struct {
	CPUs     int     `json:"cpus"`
	CPU      string  `json:"cpu"`
	Kernel   string  `json:"kernel"`
	Go       string  `json:"go"`
	FS       string  `json:"fs"`
	Dir      string  `json:"dir"`
	FsyncP50 float64 `json:"fsync_p50_ms"`
	NATS     string  `json:"nats_server"`
}

// Result is a whole run.
type Result struct {
	Machine  Machine   `json:"machine"`
	Quick    bool      `json:"quick"`
	Started  time.Time `json:"started"`
	Took     string    `json:"took"`
	Rows     []Row     `json:"rows"`
	Targets  []Target  `json:"targets"`
	Warnings []string  `json:"warnings,omitempty"`
}

// Row returns the row with key, or nil.
func (r *Result) Row(key string) *Row {
	for i := range r.Rows {
		if r.Rows[i].Key == key {
			return &r.Rows[i]
		}
	}
	return nil
}

func (r *Result) add(row Row) *Row {
	r.Rows = append(r.Rows, row)
	return &r.Rows[len(r.Rows)-1]
}

// compare adds to row the ratio of its value to the peer row's value.
func (r *Result) compare(key string, peers ...string) {
	row := r.Row(key)
	if row == nil {
		return
	}
	for _, p := range peers {
		pr := r.Row(p)
		if pr == nil || pr.Value == 0 {
			continue
		}
		row.Vs = append(row.Vs, Ratio{Peer: p, Name: short(pr), Ratio: row.Value / pr.Value})
	}
}

// ratio returns the ratio of row key to peer, and false when either is
// missing.
func (r *Result) ratio(key, peer string) (float64, bool) {
	a, b := r.Row(key), r.Row(peer)
	if a == nil || b == nil || b.Value == 0 {
		return 0, false
	}
	return a.Value / b.Value, true
}

// short is the name a ratio shows for a peer row.
func short(r *Row) string {
	if r.Short != "" {
		return r.Short
	}
	if i := strings.Index(r.Name, " ("); i > 0 {
		return r.Name[:i]
	}
	return r.Name
}

// WriteTable prints the result as a Markdown table, then the targets.
func (r *Result) WriteTable(w io.Writer) {
	m := r.Machine
	mode := "full"
	if r.Quick {
		mode = "quick"
	}
	fsync := "" // measured by the throughput section only
	if m.FsyncP50 > 0 {
		fsync = fmt.Sprintf(", fsync p50 %.3f ms", m.FsyncP50)
	}
	fmt.Fprintf(w, "teambus bench (%s run, %s): %d CPU %s, Linux %s, %s, %s on %s%s, nats-server %s\n\n",
		mode, r.Took, m.CPUs, m.CPU, m.Kernel, m.Go, m.Dir, m.FS, fsync, m.NATS)
	head := []string{"group", "measurement", "result", "p50", "p99", "n", "vs peer"}
	var rows [][]string
	for _, x := range r.Rows {
		rows = append(rows, []string{x.Group, x.Name, formatValue(x), formatLat(x, x.P50), formatLat(x, x.P99), fmt.Sprint(x.N), formatVs(x)})
	}
	writeMarkdown(w, head, rows)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Ratios are teambus divided by the peer in the row's unit: for op/s higher is better, for ms lower is better.")
	for _, x := range r.Rows {
		if x.Note != "" {
			fmt.Fprintf(w, "- %s: %s\n", x.Name, x.Note)
		}
	}
	if len(r.Targets) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| target | this run | holds |")
		fmt.Fprintln(w, "|---|---|---|")
		for _, t := range r.Targets {
			ok := "yes"
			switch {
			case t.Skipped:
				ok = "not measured"
			case !t.Holds:
				ok = "**no**"
			}
			fmt.Fprintf(w, "| %s | %s | %s |\n", t.Text, t.Got, ok)
		}
	}
	for _, s := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", s)
	}
}

func writeMarkdown(w io.Writer, head []string, rows [][]string) {
	width := make([]int, len(head))
	for i, h := range head {
		width[i] = len([]rune(h))
	}
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		b.WriteString("|")
		for i, c := range cells {
			b.WriteString(" ")
			b.WriteString(c)
			b.WriteString(strings.Repeat(" ", width[i]-len([]rune(c))))
			b.WriteString(" |")
		}
		fmt.Fprintln(w, b.String())
	}
	line(head)
	sep := make([]string, len(head))
	for i := range sep {
		sep[i] = strings.Repeat("-", width[i])
	}
	line(sep)
	for _, r := range rows {
		line(r)
	}
}

func formatValue(r Row) string {
	if r.Skipped {
		return "skipped"
	}
	switch r.Unit {
	case UnitRate:
		return thousands(r.Value) + " op/s"
	case UnitMs:
		return fmt.Sprintf("%s ms", trim(r.Value))
	case UnitMiB:
		return fmt.Sprintf("%.1f MiB", r.Value)
	case UnitPct:
		return fmt.Sprintf("%.1f%% of a core", r.Value)
	case UnitOverdue:
		return fmt.Sprintf("timeout + %.2f s (p99)", r.Value)
	case UnitTimes:
		return fmt.Sprintf("%.4f× its size", r.Value)
	}
	return fmt.Sprintf("%g %s", r.Value, r.Unit)
}

func formatLat(r Row, v float64) string {
	if v == 0 {
		return ""
	}
	if r.Unit == UnitOverdue {
		return fmt.Sprintf("%+.2f s", v)
	}
	return trim(v) + " ms"
}

func formatVs(r Row) string {
	var parts []string
	for _, v := range r.Vs {
		parts = append(parts, fmt.Sprintf("%s× %s", trim(v.Ratio), v.Name))
	}
	return strings.Join(parts, "; ")
}

// trim prints v with three significant digits at most.
func trim(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	case v >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

// thousands prints a rate as an integer with thousands separators.
func thousands(v float64) string {
	if v < 10 {
		return fmt.Sprintf("%.1f", v)
	}
	s := fmt.Sprintf("%.0f", v)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
