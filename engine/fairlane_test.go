package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/engine/workflow"
	"github.com/batonrun/baton/internal/pgtest"
)

// startAs starts a run of workflow "fw" for the tenant through eng.
func startAs(t *testing.T, eng *engine.Engine, tenant, lane string) *engine.Execution {
	t.Helper()
	var x *engine.Execution
	require.NoError(t, eng.WithTx(context.Background(), func(tx pgx.Tx) error {
		var err error
		x, err = eng.StartExecution(context.Background(), tx, engine.StartParams{TenantID: tenant, WorkflowID: "fw", Lane: lane,
			Input: map[string]any{"lane": lane}})
		return err
	}))
	return x
}

// blockingWork registers the tool "work", whose calls last until release
// is closed.
func blockingWork(release chan struct{}) *engine.Tools {
	tools := engine.NewTools()
	tools.Register("work", func(ctx context.Context, _ engine.ToolCall) (map[string]any, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return map[string]any{"done": true}, nil
	})
	return tools
}

// defineForTenants stores workflow "fw" (a call of "work") for each tenant.
func defineForTenants(t *testing.T, eng *engine.Engine, tenants ...string) {
	t.Helper()
	for _, tenant := range tenants {
		_, _, err := eng.DefineWorkflow(context.Background(), eng.Pool(), tenant, []byte(taskWorkflow("fw", "work")))
		require.NoError(t, err)
	}
}

// laneSampler samples, every few milliseconds until stopped, the running
// executions of lane main in all and per tenant, and counts the samples
// over limit or over perTenant (when not 0).
type laneSampler struct {
	samples, overLimit, overShare atomic.Int64
	stop, done                    chan struct{}
}

func sampleLane(t *testing.T, eng *engine.Engine, limit, perTenant int) *laneSampler {
	s := &laneSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			select {
			case <-s.stop:
				return
			default:
			}
			rows, err := eng.Pool().Query(context.Background(), `SELECT tenant_id, count(*) FROM agent_execution
				WHERE lane = 'main' AND status = 'running' GROUP BY tenant_id`)
			if err != nil {
				continue
			}
			total := 0
			for rows.Next() {
				var tenant string
				var n int
				if rows.Scan(&tenant, &n) != nil {
					continue
				}
				total += n
				if perTenant > 0 && n > perTenant {
					s.overShare.Add(1)
				}
			}
			rows.Close()
			if total > limit {
				s.overLimit.Add(1)
			}
			s.samples.Add(1)
			time.Sleep(2 * time.Millisecond)
		}
	}()
	t.Cleanup(s.end)
	return s
}

func (s *laneSampler) end() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

// admittedInOrder checks that the tenant's runs were admitted (started_at,
// taken under the lane row lock) in the order they were created.
func admittedInOrder(t *testing.T, eng *engine.Engine, tenant string) {
	t.Helper()
	rows, err := eng.Pool().Query(context.Background(), `SELECT id FROM agent_execution WHERE tenant_id = $1 ORDER BY started_at`, tenant)
	require.NoError(t, err)
	order, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	require.True(t, sort.SliceIsSorted(order, func(i, j int) bool { return order[i] < order[j] }), "tenant %s admitted out of order: %v", tenant, order)
}

// Tenant A starts 200 one-second runs in main (limit 4) through
// two processes; tenant B then starts one. B's run is admitted within about
// one slot-free time (a second), not after A's 50-second backlog. A sampler
// never sees main over its limit, and each tenant's runs are admitted in
// the order they were started.
func TestFairAdmissionAcrossTenants(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDatabase(t)
	var hurry atomic.Bool
	tools := engine.NewTools()
	tools.Register("work", func(ctx context.Context, _ engine.ToolCall) (map[string]any, error) {
		if !hurry.Load() {
			time.Sleep(time.Second)
		}
		return map[string]any{"done": true}, nil
	})
	cfg := engine.Config{Tools: tools, LaneLimits: map[string]int{"main": 4}}
	p1, p2 := laneProcessWith(t, dbURL, cfg), laneProcessWith(t, dbURL, cfg)
	defineForTenants(t, p1, "acme", "globex")
	sampler := sampleLane(t, p1, 4, 0)

	for i := range 200 {
		startAs(t, []*engine.Engine{p1, p2}[i%2], "acme", "main")
	}
	b := startAs(t, p2, "globex", "main")
	var waited time.Duration
	require.Eventually(t, func() bool {
		x, err := p1.GetExecution(context.Background(), p1.Pool(), "globex", b.ExecutionID)
		require.NoError(t, err)
		if x.StartedAt == nil {
			return false
		}
		waited = x.StartedAt.Sub(x.CreatedAt)
		return true
	}, 20*time.Second, 10*time.Millisecond, "B's run was not admitted behind A's backlog")
	t.Logf("B's run admitted %v after it was started, behind 196 pending runs of A", waited)
	require.Less(t, waited, 2500*time.Millisecond, "about one slot-free time (1 s), not A's backlog (~50 s)")

	hurry.Store(true)
	require.Eventually(t, func() bool {
		return countRows(t, p1.Pool(), `SELECT count(*) FROM agent_execution WHERE status <> 'completed'`) == 0
	}, 90*time.Second, 50*time.Millisecond)
	sampler.end()
	t.Logf("samples=%d", sampler.samples.Load())
	require.Greater(t, sampler.samples.Load(), int64(10))
	require.Zero(t, sampler.overLimit.Load(), "a sample saw main running above its limit")
	admittedInOrder(t, p1, "acme")
}

// lanes.main.perTenant caps one tenant's share of a global lane: A's backlog
// never holds more than 2 of main's 4 slots, so B's runs start at once.
func TestPerTenantCapInAGlobalLane(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDatabase(t)
	release := make(chan struct{})
	tools := blockingWork(release)
	cfg := engine.Config{Tools: tools, LaneLimits: map[string]int{"main": 4}, LanePerTenant: map[string]int{"main": 2}}
	p1, p2 := laneProcessWith(t, dbURL, cfg), laneProcessWith(t, dbURL, cfg)
	defineForTenants(t, p1, "acme", "globex")
	sampler := sampleLane(t, p1, 4, 2)
	for i := range 10 {
		startAs(t, []*engine.Engine{p1, p2}[i%2], "acme", "main")
	}
	running := func(tenant string) int {
		return countRows(t, p1.Pool(), `SELECT count(*) FROM agent_execution WHERE tenant_id = $1 AND status = 'running'`, tenant)
	}
	require.Eventually(t, func() bool { return running("acme") == 2 }, 10*time.Second, 10*time.Millisecond)
	startAs(t, p1, "globex", "main")
	startAs(t, p2, "globex", "main")
	require.Eventually(t, func() bool { return running("globex") == 2 }, 10*time.Second, 10*time.Millisecond,
		"B's runs take the two slots A may not")
	require.Equal(t, 2, running("acme"))
	lanes, err := p1.ListLanes(context.Background(), p1.Pool(), "acme", engine.LanePage{})
	require.NoError(t, err)
	for _, l := range lanes {
		if l.Lane == "main" {
			require.Equal(t, engine.LaneStatus{Lane: "main", MaxConcurrent: 4, PerTenant: 2, Running: 2, Pending: 8, OldestPendingAgeMS: l.OldestPendingAgeMS}, l,
				"a tenant sees its own runs in a global lane, not others'")
		}
	}
	close(release)
	require.Eventually(t, func() bool {
		return countRows(t, p1.Pool(), `SELECT count(*) FROM agent_execution WHERE status <> 'completed'`) == 0
	}, 60*time.Second, 20*time.Millisecond)
	sampler.end()
	require.Zero(t, sampler.overLimit.Load())
	require.Zero(t, sampler.overShare.Load(), "a sample saw a tenant over its share of main")
	admittedInOrder(t, p1, "acme")
}

// A lane name the operator did not configure belongs to the tenant that
// uses it: A's runs in "x" do not hold B's "x", each sees only its own,
// and a tenant may own at most limits.lanesPerTenant lanes.
func TestCustomLanesBelongToTheirTenant(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDatabase(t)
	release := make(chan struct{})
	tools := blockingWork(release)
	limits := workflow.DefaultLimits()
	limits.LanesPerTenant = 3
	eng := laneProcessWith(t, dbURL, engine.Config{Tools: tools, Limits: limits})
	defineForTenants(t, eng, "acme", "globex")
	a := []*engine.Execution{startAs(t, eng, "acme", "x"), startAs(t, eng, "acme", "x")}
	b := startAs(t, eng, "globex", "x")
	require.Eventually(t, func() bool {
		return countRows(t, eng.Pool(), `SELECT count(*) FROM agent_execution WHERE status = 'running'`) == 2
	}, 10*time.Second, 10*time.Millisecond)
	status := func(tenant string, x *engine.Execution) engine.ExecutionStatus {
		got, err := eng.GetExecution(context.Background(), eng.Pool(), tenant, x.ExecutionID)
		require.NoError(t, err)
		return got.Status
	}
	require.Equal(t, engine.StatusRunning, status("acme", a[0]))
	require.Equal(t, engine.StatusPending, status("acme", a[1]), "A's own x has limit 1")
	require.Equal(t, engine.StatusRunning, status("globex", b), "B's x is not A's")

	own := func(tenant string) map[string]engine.LaneStatus {
		lanes, err := eng.ListLanes(context.Background(), eng.Pool(), tenant, engine.LanePage{})
		require.NoError(t, err)
		out := map[string]engine.LaneStatus{}
		for _, l := range lanes {
			out[l.Lane] = l
		}
		return out
	}
	require.Equal(t, 1, own("acme")["x"].Running)
	require.Equal(t, 1, own("acme")["x"].Pending)
	require.Equal(t, 1, own("globex")["x"].Running)
	require.Equal(t, 0, own("globex")["x"].Pending, "B does not see A's pending run")
	require.Equal(t, 2, countRows(t, eng.Pool(), `SELECT count(*) FROM lane WHERE name = 'x'`), "one row per tenant")

	startAs(t, eng, "acme", "y")
	startAs(t, eng, "acme", "z")
	err := eng.WithTx(context.Background(), func(tx pgx.Tx) error {
		_, err := eng.StartExecution(context.Background(), tx, engine.StartParams{TenantID: "acme", WorkflowID: "fw", Lane: "w"})
		return err
	})
	var limitErr *workflow.LimitError
	require.True(t, errors.As(err, &limitErr), "a fourth lane of its own is refused: %v", err)
	require.Equal(t, "limits.lanesPerTenant", limitErr.Limit)
	startAs(t, eng, "globex", "w") // another tenant is not affected
	startAs(t, eng, "acme", "x")   // nor are A's existing lanes
	close(release)
	require.Eventually(t, func() bool {
		return countRows(t, eng.Pool(), `SELECT count(*) FROM agent_execution WHERE status <> 'completed'`) == 0
	}, 30*time.Second, 20*time.Millisecond, fmt.Sprint("runs left"))
}
