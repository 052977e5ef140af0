package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/batonrun/baton/retention"
)

// Retention is the retention section: how long Baton keeps what it writes
// (package retention). The periodic retention.sweep job removes the rest.
type Retention struct {
	// The periods of every tenant not in PerTenant; a period left out
	// takes its default.
	RetentionPeriods
	// Interval is how often the sweep runs. Default 1m; at least 1s.
	Interval Duration `json:"interval"`
	// Batch is how many executions (each with its events and messages),
	// or rows of another table, one batch removes in one short
	// transaction. Default 1000; at most 100000.
	Batch int `json:"batch"`
	// Jobs is how long River keeps a completed job (River's
	// CompletedJobRetentionPeriod; its JobCleaner removes them). Default
	// 24h, River's own.
	Jobs Duration `json:"jobs"`
	// PerTenant overrides periods by tenant id; a period left out is the
	// section's.
	PerTenant map[string]RetentionPeriods `json:"perTenant"`
}

// RetentionPeriods are the retention periods. Each is a Period: a duration,
// or "off" to keep forever.
type RetentionPeriods struct {
	// Executions is how long an ended execution is kept after it ended,
	// with its event log, its outbound messages and the inbound messages it
	// consumed. Default 7d.
	Executions *Period `json:"executions"`
	// Idempotency is the replay window of request message_ids, inbound
	// message_ids and event_ids: a repeat inside it replays the first
	// answer, a repeat after it is new. Default 24h.
	Idempotency *Period `json:"idempotency"`
	// Inbound is how long settled inbound messages that no execution owns
	// (dropped, /queue commands) are kept. Default 7d.
	Inbound *Period `json:"inbound"`
}

// Period is a retention period: a duration as Duration reads it ("7d",
// "24h", "90m", a number of milliseconds), or "off" (as "0" and 0) to keep
// forever.
type Period Duration

// UnmarshalJSON reads "off" or a duration.
func (p *Period) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil && s == "off" {
		*p = 0
		return nil
	}
	return (*Duration)(p).UnmarshalJSON(b)
}

// Retention defaults.
var (
	defaultExecutionRetention = Period(7 * 24 * time.Hour)
	defaultIdempotencyWindow  = Period(24 * time.Hour)
	defaultInboundRetention   = Period(7 * 24 * time.Hour)
	defaultJobRetention       = 24 * time.Hour
)

const maxRetentionBatch = 100_000

func (c *Config) applyRetentionDefaults() {
	r := &c.Retention
	for _, d := range []struct {
		p   **Period
		def Period
	}{{&r.Executions, defaultExecutionRetention}, {&r.Idempotency, defaultIdempotencyWindow}, {&r.Inbound, defaultInboundRetention}} {
		if *d.p == nil {
			v := d.def
			*d.p = &v
		}
	}
	if r.Interval == 0 {
		r.Interval = Duration(retention.DefaultInterval)
	}
	if r.Batch == 0 {
		r.Batch = retention.DefaultBatch
	}
	if r.Jobs == 0 {
		r.Jobs = Duration(defaultJobRetention)
	}
}

// validateRetention checks the retention section.
func (c *Config) validateRetention() []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	r := c.Retention
	problems = append(problems, r.RetentionPeriods.check("retention")...)
	if r.Interval < Duration(time.Second) {
		add("retention.interval must be at least 1s")
	}
	if r.Jobs < Duration(time.Second) {
		add("retention.jobs must be at least 1s")
	}
	if r.Batch < 1 || r.Batch > maxRetentionBatch {
		add("retention.batch must be between 1 and %d", maxRetentionBatch)
	}
	for _, tenant := range slices.Sorted(maps.Keys(r.PerTenant)) {
		if tenant == "" || len(tenant) > c.Limits.IDBytes {
			add("retention.perTenant: a tenant id must be 1 to %d bytes", c.Limits.IDBytes)
			continue
		}
		problems = append(problems, r.PerTenant[tenant].check("retention.perTenant."+tenant)...)
	}
	return problems
}

func (p RetentionPeriods) check(where string) []string {
	var problems []string
	for _, f := range []struct {
		name string
		p    *Period
	}{{"executions", p.Executions}, {"idempotency", p.Idempotency}, {"inbound", p.Inbound}} {
		if f.p != nil && *f.p < 0 {
			problems = append(problems, fmt.Sprintf("%s.%s must not be negative", where, f.name))
		}
	}
	return problems
}

// RetentionConfig returns the sweep's configuration (its Logger and
// Metrics left for the caller): the section's periods for every tenant,
// and each perTenant entry over them.
func (c *Config) RetentionConfig() retention.Config {
	r := c.Retention
	def := r.RetentionPeriods.policy(retention.Policy{})
	out := retention.Config{Default: def, Interval: time.Duration(r.Interval), Batch: r.Batch}
	if len(r.PerTenant) > 0 {
		out.PerTenant = make(map[string]retention.Policy, len(r.PerTenant))
		for tenant, p := range r.PerTenant {
			out.PerTenant[tenant] = p.policy(def)
		}
	}
	return out
}

// policy is p over base: a period p leaves out is base's.
func (p RetentionPeriods) policy(base retention.Policy) retention.Policy {
	pick := func(v *Period, fallback time.Duration) time.Duration {
		if v == nil {
			return fallback
		}
		return time.Duration(*v)
	}
	return retention.Policy{
		Executions:  pick(p.Executions, base.Executions),
		Idempotency: pick(p.Idempotency, base.Idempotency),
		Inbound:     pick(p.Inbound, base.Inbound),
	}
}

// parseDuration reads a Go duration ("90m", "1h30m") that may start with
// a number of days ("7d", "1d12h", "1.5d").
func parseDuration(s string) (time.Duration, error) {
	days, rest, ok := strings.Cut(s, "d")
	if !ok {
		return time.ParseDuration(s)
	}
	n, err := strconv.ParseFloat(days, 64)
	if err != nil || n < 0 || n > 100_000 || strings.ContainsAny(days, "eE+-") {
		return 0, fmt.Errorf("invalid duration %q", s)
	}
	d := time.Duration(n * float64(24*time.Hour))
	if rest == "" {
		return d, nil
	}
	more, err := time.ParseDuration(rest)
	if err != nil || more < 0 {
		return 0, fmt.Errorf("invalid duration %q", s)
	}
	return d + more, nil
}
