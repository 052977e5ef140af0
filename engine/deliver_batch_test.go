package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/internal/pgtest"
	"github.com/batonrun/baton/jobs"
)

// raceChannel is a channel shared by two processes: it numbers every
// message it accepts in one sequence, refuses each message whose id is a
// multiple of 13 the first time it is offered, and takes longer than a
// batch waits (straggleAfter) for every seventh offer.
type raceChannel struct {
	mu       sync.Mutex
	seq      int
	accepted map[int64][]int // message id → the sequence numbers it was accepted at
	refused  map[int64]bool
	offers   atomic.Int64
}

func (c *raceChannel) Deliver(ctx context.Context, msg engine.OutboundMessage) error {
	if c.offers.Add(1)%7 == 0 {
		select {
		case <-time.After(30 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if msg.ID%13 == 0 && !c.refused[msg.ID] {
		c.refused[msg.ID] = true
		return errors.New("channel busy")
	}
	c.seq++
	c.accepted[msg.ID] = append(c.accepted[msg.ID], c.seq)
	return nil
}

// Batched prompt delivery under -race, two processes on one database, each
// delivering promptly with 32 slots: 400 runs started by 40 goroutines on 25
// threads, each run sending one message. Every message reaches the channel
// exactly once (a refusal is retried by a job, a slow channel
// finishes after its batch moved on), each thread's messages in outbox
// order, no delivery job is left behind, and the processes did batch.
func TestPromptBatchesTwoProcesses(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	const (
		runs    = 400
		threads = 25
		clients = 40
	)
	channel := &raceChannel{accepted: map[int64][]int{}, refused: map[int64]bool{}}
	var engines []*engine.Engine
	for range 2 {
		pool, err := pgxpool.New(context.Background(), url)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		eng, err := engine.New(engine.Config{Pool: pool, Channel: channel})
		require.NoError(t, err)
		client, err := jobs.NewClient(pool, jobs.Config{Engine: eng})
		require.NoError(t, err)
		startClient(t, client)
		t.Cleanup(eng.DeliverPromptly(32))
		engines = append(engines, eng)
	}
	_, _, err := engines[0].DefineWorkflow(context.Background(), engines[0].Pool(), "tenant-batch", []byte(greetWorkflow))
	require.NoError(t, err)

	var next atomic.Int64
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			eng := engines[c%2]
			for i := next.Add(1) - 1; i < runs; i = next.Add(1) - 1 {
				thread := fmt.Sprintf("batch-%d", rand.IntN(threads))
				err := eng.WithTx(context.Background(), func(tx pgx.Tx) error {
					_, err := eng.StartExecution(context.Background(), tx, engine.StartParams{TenantID: "tenant-batch", WorkflowID: "greet", ThreadID: thread})
					return err
				})
				assert.NoError(t, err, "run %d", i)
			}
		})
	}
	wg.Wait()

	pool := engines[0].Pool()
	require.Eventually(t, func() bool {
		return countRows(t, pool, `SELECT count(*) FROM thread_message WHERE status <> 'delivered'`) == 0 &&
			countRows(t, pool, `SELECT count(*) FROM agent_execution WHERE status <> 'completed'`) == 0
	}, 60*time.Second, 20*time.Millisecond, "every run ended and every message was delivered")
	require.Eventually(t, func() bool {
		return countRows(t, pool, `SELECT count(*) FROM river_job WHERE kind = 'message.deliver' AND state NOT IN ('completed', 'discarded', 'cancelled')`) == 0
	}, 30*time.Second, 20*time.Millisecond, "no delivery job left to run")

	channel.mu.Lock()
	defer channel.mu.Unlock()
	require.Len(t, channel.accepted, runs, "every message reached the channel")
	for id, at := range channel.accepted {
		require.Len(t, at, 1, "message %d reached the channel %d times", id, len(at))
	}
	require.NotEmpty(t, channel.refused, "some offers were refused and retried")
	rows, err := pool.Query(context.Background(), `
		SELECT m.thread_id, m.id FROM thread_message m WHERE m.direction = 'out' ORDER BY m.thread_id, m.delivery_seq, m.id`)
	require.NoError(t, err)
	last := map[int64]int{}
	for rows.Next() {
		var thread, id int64
		require.NoError(t, rows.Scan(&thread, &id))
		at := channel.accepted[id][0]
		require.Greater(t, at, last[thread], "thread %d: message %d reached the channel before a message ahead of it", thread, id)
		last[thread] = at
	}
	require.NoError(t, rows.Err())
	var batches, delivered int64
	for _, eng := range engines {
		b, n := eng.PromptBatches()
		batches, delivered = batches+b, delivered+n
	}
	worked := countRows(t, pool, `SELECT count(*) FROM river_job WHERE kind = 'message.deliver' AND state = 'completed'`)
	t.Logf("%d prompt batches delivered %d messages; River worked %d delivery jobs", batches, delivered, worked)
	require.Positive(t, batches)
	require.Less(t, batches, delivered, "some batch delivered more than one thread")
}
