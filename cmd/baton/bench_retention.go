package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/internal/benchkit"
	"github.com/batonrun/baton/jobs"
	"github.com/batonrun/baton/retention"
)

// retentionCost is figure (f): figure (b) at the first concurrency in
// interleaved pairs, first without retention, then with everything kept
// for b.cfg.retention and swept every tenth of it (as baton soak does), and
// the median of the pairs' ratios. Before each measured run with retention
// a sweep removes what the runs before it left, so that the run removes
// rows at the rate it writes them, as a deployment does once its first
// retention period has passed, not a backlog.
func (b *bencher) retentionCost(ctx context.Context) (benchRow, error) {
	c, r := b.cfg.concurrency[0], b.cfg.retention
	var without, with, ratios []float64
	for round := range b.cfg.retentionRounds {
		b.progress("(f) retention cost: pair %d of %d, without retention", round+1, b.cfg.retentionRounds)
		off, err := b.fiveNodeRate(ctx, b.jobsConfig(), c)
		if err != nil {
			return benchRow{}, err
		}
		sweep := retention.New(b.pool, retention.Config{
			Default:  retention.Policy{Executions: r, Idempotency: r, Inbound: r},
			Interval: max(r/10, time.Second),
		})
		if err := sweepAll(ctx, sweep); err != nil {
			return benchRow{}, err
		}
		b.progress("(f) retention cost: pair %d of %d, retention %s", round+1, b.cfg.retentionRounds, r)
		jc := b.jobsConfig()
		jc.Retention, jc.CompletedJobRetention = sweep, r
		on, err := b.fiveNodeRate(ctx, jc, c)
		if err != nil {
			return benchRow{}, err
		}
		without, with, ratios = append(without, off), append(with, on), append(ratios, on/off)
	}
	m := median(ratios)
	return benchRow{
		Figure: "(f)", What: fmt.Sprintf("(b) at concurrency %d with retention %s ÷ without", c, r),
		Value: m, Unit: "ratio", Measured: true, Ratio: m, Target: "≥ 0.95", Met: verdict(m >= 0.95),
		Detail: fmt.Sprintf("median of %d interleaved pairs %s; executions/s without %.1f, with %.1f (medians)",
			len(ratios), formatRatios(ratios), median(without), median(with)),
	}, nil
}

// fiveNodeRate runs figure (b) at concurrency c on a Baton with the River
// settings of jc and returns its executions a second.
func (b *bencher) fiveNodeRate(ctx context.Context, jc jobs.Config, c int) (float64, error) {
	baton, err := benchkit.StartBaton(ctx, b.pool, jc, benchTenant, benchkit.FiveNodeWorkflow)
	if err != nil {
		return 0, err
	}
	defer baton.Stop(ctx)
	params := func(int) engine.StartParams {
		return engine.StartParams{TenantID: benchTenant, WorkflowID: "bench", Input: benchkit.FiveNodeInput(), Priority: 5, LaneFirst: true}
	}
	r, err := benchkit.RunExecutions(ctx, b.pool, baton, b.window(), c, benchkit.Nodes, params)
	return r.PerSecond, err
}

// sweepAll sweeps until nothing past retention is left.
func sweepAll(ctx context.Context, s *retention.Sweeper) error {
	for {
		res, err := s.Sweep(ctx)
		if err != nil {
			return fmt.Errorf("sweeping before a measured run: %w", err)
		}
		if !res.More {
			return nil
		}
	}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func formatRatios(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(parts, " ")
}
