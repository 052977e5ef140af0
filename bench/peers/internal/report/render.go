package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Markdown writes the medians table and the ratios table.
func (b *Book) Markdown(w io.Writer) {
	fmt.Fprintln(w, "| fig | system | what | throughput /s | p50 ms | p99 ms | measured per round |")
	fmt.Fprintln(w, "|---|---|---|---:|---:|---:|---:|")
	for _, s := range b.series {
		thr := median(each(s, func(m Measurement) float64 { return m.PerSecond }))
		p50 := median(each(s, func(m Measurement) float64 { return ms(m.P50) }))
		p99 := median(each(s, func(m Measurement) float64 { return ms(m.P99) }))
		n := median(each(s, func(m Measurement) float64 { return float64(m.Count) }))
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %.0f |\n", s.Figure, s.System, s.What, cell(thr), cell(p50), cell(p99), n)
	}
	if len(b.ratios) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| fig | ratio | of | median of same-round ratios | per round |")
	fmt.Fprintln(w, "|---|---|---|---:|---|")
	for _, r := range b.ratios {
		rounds := b.ratioRounds(r)
		if rounds == nil {
			continue // a series not measured
		}
		per := make([]string, len(rounds))
		for i, x := range rounds {
			per[i] = fmt.Sprintf("%.2f", x)
		}
		fmt.Fprintf(w, "| %s | %s ÷ %s | %s | %.2f | %s |\n", r.Figure, b.label(r.Num), b.label(r.Den), r.Metric, median(rounds), strings.Join(per, " "))
	}
}

// label names a series in the ratios table.
func (b *Book) label(key string) string {
	s := b.byKey[key]
	if s == nil {
		return key
	}
	return s.System + " " + s.What
}

// cell prints a median, or "-" when the figure does not measure it.
func cell(x float64) string {
	if x == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", x)
}

// jsonSeries is a series as --json prints it.
type jsonSeries struct {
	*Series
	Rounds       []jsonRound `json:"rounds"`
	MedianPerSec float64     `json:"median_per_second"`
	MedianP50Ms  float64     `json:"median_p50_ms"`
	MedianP99Ms  float64     `json:"median_p99_ms"`
}

type jsonRound struct {
	Measurement
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
}

type jsonRatio struct {
	Ratio
	PerRound []float64 `json:"per_round"`
	Median   float64   `json:"median"`
}

// JSON writes every series with its rounds and medians, and every ratio.
func (b *Book) JSON(w io.Writer, meta map[string]any) error {
	out := struct {
		Meta   map[string]any `json:"meta"`
		Series []jsonSeries   `json:"series"`
		Ratios []jsonRatio    `json:"ratios"`
	}{Meta: meta}
	for _, s := range b.series {
		js := jsonSeries{Series: s,
			MedianPerSec: median(each(s, func(m Measurement) float64 { return m.PerSecond })),
			MedianP50Ms:  median(each(s, func(m Measurement) float64 { return ms(m.P50) })),
			MedianP99Ms:  median(each(s, func(m Measurement) float64 { return ms(m.P99) })),
		}
		for _, m := range s.Rounds {
			js.Rounds = append(js.Rounds, jsonRound{Measurement: m, P50Ms: ms(m.P50), P99Ms: ms(m.P99)})
		}
		out.Series = append(out.Series, js)
	}
	for _, r := range b.ratios {
		rounds := b.ratioRounds(r)
		out.Ratios = append(out.Ratios, jsonRatio{Ratio: r, PerRound: rounds, Median: median(rounds)})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
