package retention_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/pgtest"
	"github.com/batonrun/baton/retention"
)

// Sizes of BenchmarkRetentionSweep. Expired executions have 11 events and
// a message each, as `baton bench` (b) writes; benchWriters writers write
// for benchWindow in each phase of each of benchRounds rounds.
const (
	benchTenants = 4
	benchBacklog = 20000 // expired executions per tenant for a full-speed phase
	benchEvents  = 11
	benchWindow  = 5 * time.Second
	benchWriters = 8
	benchRounds  = 3
)

// BenchmarkRetentionSweep measures what removal costs. Concurrent writers
// (each transaction 11 events and a checkpoint of a live execution, as a
// step) write event rows for benchWindow in three phases per round:
//
//   - idle: no sweep;
//   - steady: executions expire at the rate the writers wrote in the idle
//     phase (an eleventh of the event rows a second), and a sweep runs
//     every second, as retention does once a deployment has run past its
//     period: it removes what was written a period ago;
//   - full: a sweep removes a backlog as fast as it can, as when retention
//     is first turned on over months of rows.
//
// Then a sweep of a backlog on its own measures how fast a sweep removes.
// Run it alone:
//
//	go test -run '^$' -bench RetentionSweep -benchtime 1x ./retention/
func BenchmarkRetentionSweep(b *testing.B) {
	pool := pgtest.NewPool(b)
	live := liveExecutions(b, pool)
	var idle, steady, full, fullSwept, alone []float64
	for round := range benchRounds {
		idle = append(idle, writeRate(b, pool, live, nil))

		expiring := fmt.Sprintf("s%d", round)
		perSecond := idle[round] / benchEvents
		loadExpiring(b, pool, expiring, perSecond)
		steadyPolicy := retention.Config{Default: retention.Policy{}, PerTenant: map[string]retention.Policy{expiring: policy}}
		var steadySwept int64
		steady = append(steady, writeRate(b, pool, live, func(ctx context.Context) { steadySwept = sweepEverySecond(ctx, b, pool, steadyPolicy) }))

		load(b, pool, fmt.Sprintf("f%d", round))
		var swept int64
		full = append(full, writeRate(b, pool, live, func(ctx context.Context) { swept = sweepUntil(ctx, b, pool) }))
		fullSwept = append(fullSwept, float64(swept)/benchWindow.Seconds())

		load(b, pool, fmt.Sprintf("a%d", round))
		start := time.Now()
		res, err := retention.New(pool, retention.Config{Default: policy, Budget: time.Hour}).Sweep(context.Background())
		require.NoError(b, err)
		alone = append(alone, float64(res.Total())/time.Since(start).Seconds())
		b.Logf("round %d: event rows written a second: %.0f idle; %.0f while %.0f executions expired a second (%d rows swept); "+
			"%.0f while a sweep removed %.0f rows a second. A sweep alone: %.0f rows a second",
			round, idle[round], steady[round], perSecond, steadySwept, full[round], fullSwept[round], alone[round])
	}
	b.ReportMetric(median(alone), "swept-rows/s")
	b.ReportMetric(median(fullSwept), "full-swept-rows/s")
	b.ReportMetric(median(idle), "idle-event-rows/s")
	b.ReportMetric(median(steady), "steady-event-rows/s")
	b.ReportMetric(median(full), "full-event-rows/s")
	b.ReportMetric(median(steady)/median(idle), "steady-ratio")
	b.ReportMetric(median(full)/median(idle), "full-ratio")
}

// sweepUntil sweeps until ctx ends and returns the rows it removed. The
// backlog must outlast ctx: running out would leave the writers alone.
func sweepUntil(ctx context.Context, b *testing.B, pool *pgxpool.Pool) int64 {
	s := retention.New(pool, retention.Config{Default: policy, Budget: time.Hour})
	var total int64
	for ctx.Err() == nil {
		res, err := s.Sweep(ctx)
		total += res.Total()
		if ctx.Err() != nil {
			break
		}
		if !assert.NoError(b, err) || !assert.Positive(b, res.Total(), "the backlog ran out before the window ended") {
			break
		}
	}
	return total
}

// sweepEverySecond sweeps with cfg once a second until ctx ends and
// returns the rows it removed.
func sweepEverySecond(ctx context.Context, b *testing.B, pool *pgxpool.Pool, cfg retention.Config) int64 {
	s := retention.New(pool, cfg)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var total int64
	for {
		select {
		case <-ctx.Done():
			return total
		case <-tick.C:
		}
		res, err := s.Sweep(ctx)
		total += res.Total()
		if ctx.Err() == nil && !assert.NoError(b, err) {
			return total
		}
	}
}

// loadExpiring writes executions of tenant that expire (under the test
// policy) perSecond a second from now on, for a window and a second.
func loadExpiring(b *testing.B, pool *pgxpool.Pool, tenant string, perSecond float64) {
	n := int(perSecond * (benchWindow + time.Second).Seconds())
	loadExpired(b, pool, []string{tenant}, n, benchEvents, 0)
	_, err := pool.Exec(context.Background(), `
UPDATE agent_execution x SET completed_at = now() - $3 * interval '1 second' + o.n / $2 * interval '1 second'
FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM agent_execution WHERE tenant_id = $1) o
WHERE x.id = o.id`, tenant, perSecond, week.Seconds())
	require.NoError(b, err)
	_, err = pool.Exec(context.Background(), "ANALYZE")
	require.NoError(b, err)
}

// liveExecutions writes one running execution per writer and returns their
// ids.
func liveExecutions(b *testing.B, pool *pgxpool.Pool) []int64 {
	rows, err := pool.Query(context.Background(), `
WITH th AS (
    INSERT INTO thread (tenant_id, thread_id, channel, contact)
    SELECT 'live', 'live-' || i, 'api', 'live-' || i FROM generate_series(1, $1::int) i
    RETURNING id, thread_id
)
INSERT INTO agent_execution (tenant_id, execution_id, workflow_id, version, status, thread_id)
SELECT 'live', th.thread_id, 'wf', '1', 'running', th.id FROM th
RETURNING id`, benchWriters)
	require.NoError(b, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(b, err)
	return ids
}

// load writes a backlog of expired executions under fresh tenant names.
func load(b *testing.B, pool *pgxpool.Pool, prefix string) {
	tenants := make([]string, benchTenants)
	for i := range tenants {
		tenants[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	loadExpired(b, pool, tenants, benchBacklog, benchEvents, 0)
	_, err := pool.Exec(context.Background(), "ANALYZE")
	require.NoError(b, err)
}

// writeRate runs the writers for benchWindow, with during running beside
// them when it is set, and returns the event rows written a second.
func writeRate(b *testing.B, pool *pgxpool.Pool, live []int64, during func(context.Context)) float64 {
	ctx, cancel := context.WithTimeout(context.Background(), benchWindow)
	defer cancel()
	var (
		wg      sync.WaitGroup
		written atomic.Int64
	)
	if during != nil {
		wg.Go(func() { during(ctx) })
	}
	start := time.Now()
	for _, id := range live {
		wg.Go(func() {
			for ctx.Err() == nil {
				err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					if _, err := tx.Exec(ctx, `INSERT INTO execution_event (tenant_id, execution_id, action, message, payload)
						SELECT 'live', $1, 'workflow.step_update', 'step ' || k, '{"node": "n"}' FROM generate_series(1, $2::int) k`, id, benchEvents); err != nil {
						return err
					}
					_, err := tx.Exec(ctx, `UPDATE agent_execution SET step_seq = step_seq + 1, updated_at = now() WHERE id = $1`, id)
					return err
				})
				if err == nil {
					written.Add(benchEvents)
				} else if ctx.Err() == nil {
					assert.NoError(b, err)
					return
				}
			}
		})
	}
	wg.Wait()
	return float64(written.Load()) / time.Since(start).Seconds()
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
