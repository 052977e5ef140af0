package engine_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/internal/benchkit"
	"github.com/batonrun/baton/internal/pgtest"
	"github.com/batonrun/baton/jobs"
)

// countedConn counts what the client writes to the server: each write is
// a round trip, as the client waits for the answer before it writes again.
type countedConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countedConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// TestSettlingStartRoundTrips counts the round trips of the bench's
// five-node run, started as baton serve starts runs and delivered promptly:
// three for the start transaction (BEGIN with the definition's latest
// version; the reservation; its implicit thread, the message, the
// execution row and the events, held back, with the COMMIT) and two for
// the delivery (the claim, the finish). Only the engine's pool is counted, and
// nothing but this run uses it; the test's own reads go through another.
func TestSettlingStartRoundTrips(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	var writes atomic.Int64
	dial := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countedConn{Conn: c, writes: &writes}, nil
	}
	cfg.MaxConns = 2
	cfg.HealthCheckPeriod = time.Hour
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	reader, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(reader.Close)
	channel := &engine.MemoryChannel{}
	eng, err := engine.New(engine.Config{Pool: pool, Channel: channel})
	require.NoError(t, err)
	_, err = jobs.NewClient(pool, jobs.Config{Engine: eng, InsertOnly: true})
	require.NoError(t, err)
	t.Cleanup(eng.DeliverPromptly(8))
	_, _, err = eng.DefineWorkflow(ctx, pool, "tenant-rt", []byte(benchkit.FiveNodeWorkflow))
	require.NoError(t, err)

	// run starts one run and waits until its message is delivered and
	// recorded so, and returns the round trips it took.
	run := func() int64 {
		t.Helper()
		before, delivered := writes.Load(), len(channel.Messages())
		require.NoError(t, eng.WithTx(ctx, func(tx pgx.Tx) error {
			x, err := eng.StartExecution(ctx, tx, engine.StartParams{TenantID: "tenant-rt", WorkflowID: "bench", Input: benchkit.FiveNodeInput()})
			if err == nil && x.Status != engine.StatusCompleted {
				t.Errorf("the run is %s, not completed", x.Status)
			}
			return err
		}))
		require.Eventually(t, func() bool {
			var pending int
			require.NoError(t, reader.QueryRow(ctx, `SELECT count(*) FROM thread_message WHERE status = 'pending'`).Scan(&pending))
			return pending == 0 && len(channel.Messages()) > delivered
		}, 10*time.Second, time.Millisecond)
		return writes.Load() - before
	}
	// The first runs prepare each statement on each connection: a round
	// trip of its own.
	for range 4 {
		run()
	}
	require.Equal(t, int64(3+2), run(), "round trips of a start and its delivery")
}
