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

// Sizes of BenchmarkRetentionSweep: each round loads benchBacklog expired
// executions per tenant (11 events and a message each, as `baton bench`
// (b) writes), then has benchWriters writers write events for benchWindow
// with no sweep and for benchWindow with a sweep running, in alternating
// order, then times a sweep of what is left on its own.
const (
	benchTenants = 4
	benchBacklog = 15000
	benchEvents  = 11
	benchWindow  = 5 * time.Second
	benchWriters = 8
	benchRounds  = 5
)

// BenchmarkRetentionSweep measures what removal costs: how many rows a
// sweep removes a second on its own, and how many event rows concurrent
// writers (each transaction 11 events and a checkpoint of a live
// execution, as a step) write a second without a sweep and with one
// removing a backlog as fast as it can, in interleaved rounds. Run it
// alone:
//
//	go test -run '^$' -bench RetentionSweep -benchtime 1x ./retention/
func BenchmarkRetentionSweep(b *testing.B) {
	pool := pgtest.NewPool(b)
	live := liveExecutions(b, pool)
	var alone, idle, sweeping, during []float64
	for round := range benchRounds {
		load(b, pool, round)
		var swept int64
		sweep := func(ctx context.Context) { swept = sweepUntil(ctx, b, pool) }
		if round%2 == 0 {
			idle = append(idle, writeRate(b, pool, live, nil))
			sweeping = append(sweeping, writeRate(b, pool, live, sweep))
		} else {
			sweeping = append(sweeping, writeRate(b, pool, live, sweep))
			idle = append(idle, writeRate(b, pool, live, nil))
		}
		during = append(during, float64(swept)/benchWindow.Seconds())
		start := time.Now()
		res, err := retention.New(pool, retention.Config{Default: policy, Budget: time.Hour}).Sweep(context.Background())
		require.NoError(b, err)
		alone = append(alone, float64(res.Total())/time.Since(start).Seconds())
		b.Logf("round %d: writes %.0f event rows/s idle, %.0f while a sweep removed %.0f rows/s; then %d rows left, swept alone at %.0f rows/s",
			round, idle[round], sweeping[round], during[round], res.Total(), alone[round])
	}
	b.ReportMetric(median(alone), "swept-rows/s")
	b.ReportMetric(median(during), "swept-while-writing-rows/s")
	b.ReportMetric(median(idle), "idle-event-rows/s")
	b.ReportMetric(median(sweeping), "sweeping-event-rows/s")
	b.ReportMetric(median(sweeping)/median(idle), "write-ratio")
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
func load(b *testing.B, pool *pgxpool.Pool, batch int) {
	tenants := make([]string, benchTenants)
	for i := range tenants {
		tenants[i] = fmt.Sprintf("b%d-%d", batch, i)
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
