package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/batonrun/baton/engine"
)

var (
	breakerStateDesc = prometheus.NewDesc("baton_tool_breaker_state",
		"A tool's circuit breaker in this process: 1 for the state it is in (closed, half-open, open), 0 for the others.",
		[]string{"tool", "state"}, nil)
	breakerFailuresDesc = prometheus.NewDesc("baton_tool_breaker_consecutive_failures",
		"Retryable failures of a tool since its last success, in this process.", []string{"tool"}, nil)
)

// breakers reports the tools' circuit breakers. Breakers live in each
// process (each probes its tools on its own), so these gauges are per
// process, not read from the database.
type breakers struct{ tools *engine.Tools }

// Describe sends the breaker gauges' descriptors.
func (b breakers) Describe(ch chan<- *prometheus.Desc) {
	ch <- breakerStateDesc
	ch <- breakerFailuresDesc
}

// Collect reads every tool's breaker.
func (b breakers) Collect(ch chan<- prometheus.Metric) {
	for _, s := range b.tools.Breakers() {
		for _, state := range []string{"closed", "half-open", "open"} {
			v := 0.0
			if s.State == state {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(breakerStateDesc, prometheus.GaugeValue, v, s.Tool, state)
		}
		ch <- prometheus.MustNewConstMetric(breakerFailuresDesc, prometheus.GaugeValue, float64(s.ConsecutiveFailures), s.Tool)
	}
}

// WatchBreakers adds the circuit breakers of tools to the metrics.
func (m *Metrics) WatchBreakers(tools *engine.Tools) {
	m.registry.MustRegister(breakers{tools: tools})
}
