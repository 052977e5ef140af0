package report

import (
	"fmt"
	"slices"
	"time"
)

// Measurement is one figure's result in one round.
type Measurement struct {
	// Count is how many operations (runs, resumes, steps) were measured.
	Count int `json:"count"`
	// PerSecond is the throughput; zero for a latency-only figure.
	PerSecond float64 `json:"per_second,omitempty"`
	// P50 and P99 are latencies by the client's clock; zero when not
	// measured.
	P50 time.Duration `json:"-"`
	P99 time.Duration `json:"-"`
}

// Series is one figure of one system, measured in every round.
type Series struct {
	// Key names the series in ratios ("1/baton").
	Key    string        `json:"key"`
	Figure string        `json:"figure"`
	System string        `json:"system"`
	What   string        `json:"what"`
	Rounds []Measurement `json:"-"`
}

// Ratio compares two series round by round.
type Ratio struct {
	Figure string `json:"figure"`
	// Num and Den are the keys of the series divided.
	Num string `json:"numerator"`
	Den string `json:"denominator"`
	// Metric is "throughput" or "p50".
	Metric string `json:"metric"`
}

// Book holds the series in the order they were declared.
type Book struct {
	series []*Series
	byKey  map[string]*Series
	ratios []Ratio
}

// NewBook returns an empty book.
func NewBook() *Book { return &Book{byKey: map[string]*Series{}} }

// Declare adds a series; measurements are added to it with Add.
func (b *Book) Declare(s Series) {
	b.series = append(b.series, &s)
	b.byKey[s.Key] = &s
}

// Compare adds a ratio to report.
func (b *Book) Compare(r Ratio) { b.ratios = append(b.ratios, r) }

// Add records a round's measurement of the series key.
func (b *Book) Add(key string, m Measurement) error {
	s, ok := b.byKey[key]
	if !ok {
		return fmt.Errorf("no series %q", key)
	}
	s.Rounds = append(s.Rounds, m)
	return nil
}

// ratioRounds is the series' same-round ratios, over the rounds both have.
func (b *Book) ratioRounds(r Ratio) []float64 {
	num, den := b.byKey[r.Num], b.byKey[r.Den]
	if num == nil || den == nil {
		return nil
	}
	var out []float64
	for i := range min(len(num.Rounds), len(den.Rounds)) {
		n, d := metric(num.Rounds[i], r.Metric), metric(den.Rounds[i], r.Metric)
		if d > 0 {
			out = append(out, n/d)
		}
	}
	return out
}

func metric(m Measurement, name string) float64 {
	if name == "p50" {
		return float64(m.P50)
	}
	return m.PerSecond
}

// median is the middle value, or the mean of the two middle ones; 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// each applies f to every round of s.
func each(s *Series, f func(Measurement) float64) []float64 {
	out := make([]float64, len(s.Rounds))
	for i, m := range s.Rounds {
		out[i] = f(m)
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
