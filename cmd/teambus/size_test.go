package main

import (
	"errors"
	"testing"

	"github.com/teambus/teambus"
)

func TestParseSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int64
	}{
		{"", 0}, {"0", 0}, {"1000000", 1000000}, {"512B", 512}, {"512b", 512},
		{"1KiB", 1024}, {"1k", 1024}, {"1KB", 1000}, {"512MiB", 512 << 20}, {"512mib", 512 << 20},
		{"10GiB", 10 << 30}, {"10G", 10 << 30}, {"10GB", 10e9}, {"1.5GiB", 3 << 29}, {"2TiB", 2 << 40},
		{" 8 GiB ", 8 << 30}, {"1e3", 1000},
	}
	for _, tt := range tests {
		got, err := parseSize("--max-store", tt.in)
		if err != nil || got != tt.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{"abc", "10XB", "-1", "-1GiB", "GiB", "1.2.3MiB", "0x10", "inf", "NaN", "1_000", "99999999TiB"} {
		if got, err := parseSize("--max-store", in); !errors.Is(err, teambus.ErrInvalid) {
			t.Errorf("parseSize(%q) = %d, %v; want ErrInvalid", in, got, err)
		}
	}
}

func TestFormatSize(t *testing.T) {
	t.Parallel()
	for in, want := range map[int64]string{0: "0B", 512: "512B", 1024: "1KiB", 1536: "1.5KiB", 512 << 20: "512MiB", 10 << 30: "10GiB", 3 << 40: "3TiB", 5000 << 40: "5000TiB"} {
		if got := formatSize(in); got != want {
			t.Errorf("formatSize(%d) = %q, want %q", in, got, want)
		}
	}
}
