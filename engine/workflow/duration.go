package workflow

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseDuration reads a definition duration: Go's units ("30s", "10m",
// "1h30m") plus days ("7d", "1d12h").
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty duration")
	}
	var total time.Duration
	if i := strings.IndexByte(s, 'd'); i > 0 {
		days, err := strconv.ParseFloat(s[:i], 64)
		if err != nil || days < 0 {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		total = time.Duration(days * float64(24*time.Hour))
		s = s[i+1:]
		if s == "" {
			return total, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("invalid duration %q: use a number with s, m, h or d", s)
	}
	return total + d, nil
}
