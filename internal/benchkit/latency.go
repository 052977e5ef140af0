package benchkit

import (
	"fmt"
	"slices"
	"time"
)

// Latencies is a set of measured durations.
type Latencies []time.Duration

// Percentile returns the p-th percentile (0 < p < 1) by nearest rank, or 0
// for an empty set.
func (l Latencies) Percentile(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// Ms formats a duration as milliseconds with one decimal: "12.3ms".
func Ms(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}
