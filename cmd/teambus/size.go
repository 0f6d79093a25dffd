package main

import (
	"math"
	"strconv"
	"strings"

	"github.com/teambus/teambus"
)

// sizeUnits are the suffixes parseSize accepts, longest first. KiB, MiB,
// GiB, TiB and the bare K, M, G, T are powers of 1024; KB, MB, GB, TB are
// powers of 1000; B or nothing is bytes.
var sizeUnits = []struct {
	suffix string
	mult   float64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40},
	{"b", 1},
}

// parseSize parses a byte size such as "10GiB", "512MiB", "1.5G" or
// "1000000" for the flag name. Empty is 0. Bad input is ErrInvalid (exit 2).
func parseSize(name, s string) (int64, error) {
	in := strings.TrimSpace(s)
	if in == "" {
		return 0, nil
	}
	num, mult := strings.ToLower(in), 1.0
	for _, u := range sizeUnits {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(num[:len(num)-len(u.suffix)]), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) || strings.ContainsAny(num, "xXpP_") {
		return 0, teambus.Invalidf("invalid %s %q: use a size such as 512MiB, 10GiB or 1000000 (bytes)", name, s)
	}
	v := f * mult
	if v >= math.MaxInt64 {
		return 0, teambus.Invalidf("invalid %s %q: too large", name, s)
	}
	return int64(v), nil
}

// formatSize prints n bytes with a binary unit: 512B, 1.5KiB, 10GiB.
func formatSize(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + "B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 3; m /= unit {
		div *= unit
		exp++
	}
	s := strconv.FormatFloat(float64(n)/float64(div), 'f', 1, 64)
	return strings.TrimSuffix(s, ".0") + []string{"KiB", "MiB", "GiB", "TiB"}[exp]
}
