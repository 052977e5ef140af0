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

// countedEngine is an engine on a pool of two connections whose round
// trips writes counts, delivering promptly as baton serve does, with a
// River client that only inserts. reader is another pool, for the test's
// own reads, so that only the engine's work is counted.
func countedEngine(t *testing.T) (eng *engine.Engine, channel *engine.MemoryChannel, reader *pgxpool.Pool, writes *atomic.Int64) {
	t.Helper()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	writes = &atomic.Int64{}
	dial := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countedConn{Conn: c, writes: writes}, nil
	}
	cfg.MaxConns = 2
	cfg.HealthCheckPeriod = time.Hour
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	reader, err = pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(reader.Close)
	channel = &engine.MemoryChannel{}
	eng, err = engine.New(engine.Config{Pool: pool, Channel: channel})
	require.NoError(t, err)
	_, err = jobs.NewClient(pool, jobs.Config{Engine: eng, InsertOnly: true})
	require.NoError(t, err)
	t.Cleanup(eng.DeliverPromptly(8))
	return eng, channel, reader, writes
}

// roundTrips runs send, waits until every message is delivered and
// recorded so, and returns the round trips it all took. The first calls
// prepare each statement on each connection, a round trip of its own, and
// which connection a call gets is the pool's choice, so it runs send four
// times and then until two calls in a row take as many round trips.
func roundTrips(t *testing.T, channel *engine.MemoryChannel, reader *pgxpool.Pool, writes *atomic.Int64, send func()) int64 {
	t.Helper()
	once := func() int64 {
		before, delivered := writes.Load(), len(channel.Messages())
		send()
		require.Eventually(t, func() bool {
			var pending int
			require.NoError(t, reader.QueryRow(context.Background(), `SELECT count(*) FROM thread_message WHERE status = 'pending'`).Scan(&pending))
			return pending == 0 && len(channel.Messages()) > delivered
		}, 10*time.Second, time.Millisecond)
		return writes.Load() - before
	}
	for range 4 {
		once()
	}
	last := once()
	for range 20 {
		n := once()
		if n == last {
			return n
		}
		last = n
	}
	t.Fatalf("round trips never settled; the last call took %d", last)
	return 0
}

// TestSettlingStartRoundTrips counts the round trips of the bench's
// five-node run, started as baton serve starts runs and delivered promptly:
// two for the start transaction (BEGIN with the reservation, which also
// reads the definition's latest version this process guessed; its
// implicit thread, the message, the execution row and the events, held
// back, with the COMMIT) and two for the delivery (the claim, the finish).
// The first start of the workflow in the process reads its latest version
// in a round trip of its own (TestStartGuessWrong covers a wrong guess).
func TestSettlingStartRoundTrips(t *testing.T) {
	ctx := context.Background()
	eng, channel, reader, writes := countedEngine(t)
	_, _, err := eng.DefineWorkflow(ctx, reader, "tenant-rt", []byte(benchkit.FiveNodeWorkflow))
	require.NoError(t, err)
	n := roundTrips(t, channel, reader, writes, func() {
		require.NoError(t, eng.WithTx(ctx, func(tx pgx.Tx) error {
			x, err := eng.StartExecution(ctx, tx, engine.StartParams{TenantID: "tenant-rt", WorkflowID: "bench", Input: benchkit.FiveNodeInput()})
			if err == nil && x.Status != engine.StatusCompleted {
				t.Errorf("the run is %s, not completed", x.Status)
			}
			return err
		}))
	})
	require.Equal(t, int64(2+2), n, "round trips of a start and its delivery")
}

// TestInboundStartRoundTrips counts the round trips of an inbound message
// that starts a run of its thread's default workflow (the five-node run,
// which settles), as figure 3 of the peer bench sends them, and of the
// run's delivery. The router's transaction holds the session lane's row
// and the thread's row before it starts the run; the start takes neither
// again by the thread's key (StartParams.heldSession): the thread is read
// again by its id, in one round trip, instead of the session lane's lock,
// the thread's insert-if-absent and its lock by key, in three.
func TestInboundStartRoundTrips(t *testing.T) {
	ctx := context.Background()
	eng, channel, reader, writes := countedEngine(t)
	inbound := benchkit.FiveNode{ID: "inbound", Name: "lastResponse", Condition: "${lastResponse} != ''"}.JSON()
	_, _, err := eng.DefineWorkflow(ctx, reader, "tenant-rt", []byte(inbound))
	require.NoError(t, err)
	noDebounce := 0
	_, _, err = eng.UpsertThread(ctx, reader, engine.ThreadUpsert{TenantID: "tenant-rt", ThreadID: "conversation", Channel: "whatsapp",
		Contact: "+5215550001", DefaultWorkflowID: "inbound", Queue: &engine.QueueSettings{Mode: "followup", DebounceMS: &noDebounce}})
	require.NoError(t, err)
	n := roundTrips(t, channel, reader, writes, func() {
		require.NoError(t, eng.WithTx(ctx, func(tx pgx.Tx) error {
			res, err := eng.ReceiveInboundTx(ctx, tx, engine.InboundParams{TenantID: "tenant-rt", ThreadID: "conversation", Text: "hola"})
			if err == nil && res.ExecutionID == nil {
				t.Errorf("the message started no run: %s", res.Outcome)
			}
			return err
		}))
	})
	require.Equal(t, int64(15+2), n, "round trips of an inbound message's transaction and its delivery")
}

// TestSettlingResumeRoundTrips counts the round trips of an event that
// resumes a run whose next nodes settle (holdWorkflow: a message, then the
// end), in lane main with room, and of the message's delivery. The run goes
// on in the event's transaction without a slot, as a settling start does:
// no lane row is taken to admit it or to free its slot, its thread's lock
// lives in memory, and its message's id comes with the resume. Seven round
// trips for the event's transaction (BEGIN with the event's claim; the
// run's lock; its resume, which reads the lane's room; the resumed event
// with the thread's lock; the thread's queue; the message with the run's
// end; the last events and the event's answer with the COMMIT) and two for
// the delivery. Before the resume ran without a slot and the answer went
// with the COMMIT, the transaction took fifteen.
func TestSettlingResumeRoundTrips(t *testing.T) {
	ctx := context.Background()
	eng, channel, reader, writes := countedEngine(t)
	_, _, err := eng.DefineWorkflow(ctx, reader, "tenant-rt", []byte(holdWorkflow))
	require.NoError(t, err)
	var waiting []string
	for range 30 {
		require.NoError(t, eng.WithTx(ctx, func(tx pgx.Tx) error {
			x, err := eng.StartExecution(ctx, tx, engine.StartParams{TenantID: "tenant-rt", WorkflowID: "hold"})
			if err == nil {
				waiting = append(waiting, x.ExecutionID)
			}
			return err
		}))
	}
	n := roundTrips(t, channel, reader, writes, func() {
		id := waiting[0]
		waiting = waiting[1:]
		res, err := eng.PublishEvent(ctx, engine.PublishEventParams{TenantID: "tenant-rt", EventType: engine.EventTypeEventCompleted,
			EventID: "go-" + id, ExecutionID: id, Data: map[string]any{"event_id": "go"}})
		require.NoError(t, err)
		require.Equal(t, []string{id}, res.Resumed)
	})
	require.Equal(t, int64(7+2), n, "round trips of an event's transaction and its delivery")
}
