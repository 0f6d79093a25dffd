package bench

import (
	"math"
	"sort"
	"time"
)

// sample is what one measurement loop collected: how many operations
// completed in how long, and the latency of each when it was timed alone.
type sample struct {
	n       int
	elapsed time.Duration
	lat     []time.Duration
}

// rate is operations per second.
func (s sample) rate() float64 {
	if s.elapsed <= 0 {
		return 0
	}
	return float64(s.n) / s.elapsed.Seconds()
}

// pct returns the q-quantile (0..1) of the latencies, nearest rank.
func (s sample) pct(q float64) time.Duration { return percentile(s.lat, q) }

// percentile returns the q-quantile of ds by nearest rank; 0 for none.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	c := append([]time.Duration(nil), ds...)
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	i := int(math.Ceil(q*float64(len(c)))) - 1
	i = max(0, min(i, len(c)-1))
	return c[i]
}

// ms converts a duration to milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// secs converts a duration to seconds.
func secs(d time.Duration) float64 { return d.Seconds() }
