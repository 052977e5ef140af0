package retention_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/retention"
)

// talk answers a message and ends.
const talk = `{"workflow_id": "talk", "version": "1", "nodes": [
  {"id": "start", "type": "start", "next": "say"},
  {"id": "say", "type": "action", "actionType": "send_message", "parameters": {"message": "hola {{lastResponse}}"}, "next": "end"},
  {"id": "end", "type": "end"}]}`

// busy runs a gated tool, then waits for the "entrevista" event.
const busy = `{"workflow_id": "busy", "version": "1", "nodes": [
  {"id": "start", "type": "start", "next": "work"},
  {"id": "work", "type": "task", "task": "gate", "inputs": {"key": "{{key}}"}, "next": "wait"},
  {"id": "wait", "type": "action", "actionType": "wait_for_event", "parameters": {"event_id": "entrevista"}, "next": "end"},
  {"id": "end", "type": "end"}]}`

// deliveredOf counts the delivered outbound messages of an execution.
func (b *bundle) deliveredOf(t *testing.T, id int64) int {
	return count(t, b.pool, `SELECT count(*) FROM thread_message WHERE execution_id = $1 AND direction = 'out' AND status = 'delivered'`, id)
}

// An ended execution past retention goes with its event log, its outbound
// messages and the inbound message it consumed; the reference of an event
// buffered for it is cleared, the event stays (its event_id is inside the
// replay window). A recent one, and the thread, stay.
func TestSweepRemovesExpiredExecutionsAndWhatTheyOwn(t *testing.T) {
	t.Parallel()
	g := newGate()
	b := setup(t, setupOpts{tools: map[string]engine.ToolFunc{"gate": g.tool}})
	b.define(t, talk)
	b.define(t, busy)
	b.thread(t, "th", "talk")

	old := b.inbound(t, "th", "buenas", "m-old")
	require.Equal(t, engine.OutcomeStarted, old.Outcome)
	oldX := b.waitFor(t, *old.ExecutionID, terminal)
	require.Eventually(t, func() bool { return b.deliveredOf(t, oldX.ID) == 1 }, 20*time.Second, 20*time.Millisecond)
	require.Equal(t, 1, count(t, b.pool, `SELECT count(*) FROM thread_message WHERE execution_id = $1 AND direction = 'in' AND status = 'consumed'`, oldX.ID))

	buffered := b.start(t, engine.StartParams{WorkflowID: "busy", Input: map[string]any{"key": "b"}})
	g.entered(t, "b")
	res, err := b.engine.PublishEvent(context.Background(), engine.PublishEventParams{TenantID: b.tenant, EventType: engine.EventTypeEventCompleted,
		EventID: "ev-b", ExecutionID: buffered.ExecutionID, Data: map[string]any{"event_id": "entrevista"}})
	require.NoError(t, err)
	require.Equal(t, []string{buffered.ExecutionID}, res.Buffered)
	g.release("b")
	b.waitFor(t, buffered.ExecutionID, terminal)

	recent := b.start(t, engine.StartParams{WorkflowID: "talk", ThreadID: "th"})
	recentX := b.waitFor(t, recent.ExecutionID, terminal)
	require.Eventually(t, func() bool { return b.deliveredOf(t, recentX.ID) == 1 }, 20*time.Second, 20*time.Millisecond)

	expired := []int64{oldX.ID, b.rowID(t, buffered.ExecutionID)}
	events := count(t, b.pool, `SELECT count(*) FROM execution_event WHERE execution_id = ANY($1)`, expired)
	messages := count(t, b.pool, `SELECT count(*) FROM thread_message WHERE execution_id = ANY($1)`, expired)
	require.Positive(t, events)
	recentEvents := count(t, b.pool, `SELECT count(*) FROM execution_event WHERE execution_id = $1`, recentX.ID)

	// Inside retention nothing goes.
	require.Zero(t, b.sweep(t, retention.Config{}).Total())

	b.age(t, oldX.ExecutionID, week+time.Hour)
	b.age(t, buffered.ExecutionID, week+time.Hour)
	swept := b.sweep(t, retention.Config{})
	// buffered was started without a thread: its implicit thread goes with it.
	require.Equal(t, map[string]int64{retention.TableExecutions: 2, retention.TableEvents: int64(events), retention.TableMessages: int64(messages),
		retention.TableThreads: 1}, swept.Removed)
	require.Zero(t, count(t, b.pool, `SELECT count(*) FROM thread WHERE tenant_id = $1 AND thread_id = $2`, b.tenant, "implicit:"+buffered.ExecutionID))
	require.Equal(t, 1, count(t, b.pool, `SELECT count(*) FROM thread WHERE tenant_id = $1 AND thread_id = 'th'`, b.tenant))

	require.False(t, b.exists(t, oldX.ExecutionID))
	require.False(t, b.exists(t, buffered.ExecutionID))
	require.Zero(t, count(t, b.pool, `SELECT count(*) FROM execution_event WHERE execution_id = ANY($1)`, expired))
	require.Zero(t, count(t, b.pool, `SELECT count(*) FROM thread_message WHERE execution_id = ANY($1)`, expired))
	require.Equal(t, 1, count(t, b.pool, `SELECT count(*) FROM inbound_event WHERE tenant_id = $1 AND event_id = 'ev-b' AND buffered_for IS NULL`, b.tenant))

	require.True(t, b.exists(t, recentX.ExecutionID))
	require.Equal(t, recentEvents, count(t, b.pool, `SELECT count(*) FROM execution_event WHERE execution_id = $1`, recentX.ID))
	require.Equal(t, 1, b.deliveredOf(t, recentX.ID))
	_, err = b.engine.GetThread(context.Background(), b.pool, b.tenant, "th")
	require.NoError(t, err)

	// Nothing is left to remove.
	require.Zero(t, b.sweep(t, retention.Config{}).Total())
}

// A live execution stays however old it is, and so does its whole parent
// chain: a parent that ended and a grandparent that ended, past retention,
// stay while the grandchild waits. Once the grandchild ends and expires,
// one sweep removes the three, the youngest first.
// An implicit thread (of an execution started without a thread_id) goes
// with its execution only when nothing else uses it: here a second
// execution was started on it by name, and it stays until that one goes.
func TestSweepKeepsAnImplicitThreadInUse(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, talk)
	first := b.waitFor(t, b.start(t, engine.StartParams{WorkflowID: "talk"}).ExecutionID, terminal)
	implicit := "implicit:" + first.ExecutionID
	second := b.waitFor(t, b.start(t, engine.StartParams{WorkflowID: "talk", ThreadID: implicit}).ExecutionID, terminal)
	require.Eventually(t, func() bool { return b.deliveredOf(t, first.ID) == 1 && b.deliveredOf(t, second.ID) == 1 }, 20*time.Second, 20*time.Millisecond)
	threads := func() int {
		return count(t, b.pool, `SELECT count(*) FROM thread WHERE tenant_id = $1 AND thread_id = $2`, b.tenant, implicit)
	}

	b.age(t, first.ExecutionID, week+time.Hour)
	swept := b.sweep(t, retention.Config{})
	require.EqualValues(t, 1, swept.Removed[retention.TableExecutions])
	require.Zero(t, swept.Removed[retention.TableThreads])
	require.False(t, b.exists(t, first.ExecutionID))
	require.Equal(t, 1, threads(), "the second execution still uses the thread")

	b.age(t, second.ExecutionID, week+time.Hour)
	swept = b.sweep(t, retention.Config{})
	require.EqualValues(t, 1, swept.Removed[retention.TableThreads])
	require.Zero(t, threads())
}

func TestSweepKeepsTheParentChainOfALiveExecution(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, `{"workflow_id": "leaf", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "wait"},
	  {"id": "wait", "type": "action", "actionType": "wait_for_event", "parameters": {"event_id": "go"}, "next": "end"},
	  {"id": "end", "type": "end"}]}`)
	for _, wf := range [][2]string{{"mid", "leaf"}, {"root", "mid"}} {
		b.define(t, `{"workflow_id": "`+wf[0]+`", "version": "1", "nodes": [
		  {"id": "start", "type": "start", "next": "spawn"},
		  {"id": "spawn", "type": "action", "actionType": "trigger_agent", "parameters": {"workflow_id": "`+wf[1]+`", "waitForCompletion": false}, "next": "end"},
		  {"id": "end", "type": "end"}]}`)
	}
	root := b.waitFor(t, b.start(t, engine.StartParams{WorkflowID: "root"}).ExecutionID, terminal)
	mid := b.waitFor(t, root.Variables["triggeredExecutionId"].(string), terminal)
	leaf := b.waitFor(t, mid.Variables["triggeredExecutionId"].(string), waiting)
	b.age(t, root.ExecutionID, week+time.Hour)
	b.age(t, mid.ExecutionID, week+time.Hour)
	_, err := b.pool.Exec(context.Background(), `UPDATE agent_execution SET created_at = created_at - interval '90 days',
		updated_at = updated_at - interval '90 days' WHERE id = $1`, leaf.ID)
	require.NoError(t, err)

	require.Zero(t, b.sweep(t, retention.Config{}).Total())
	for _, id := range []string{root.ExecutionID, mid.ExecutionID, leaf.ExecutionID} {
		require.True(t, b.exists(t, id), id)
	}

	_, err = b.engine.PublishEvent(context.Background(), engine.PublishEventParams{TenantID: b.tenant, EventType: engine.EventTypeEventCompleted,
		EventID: "go-1", ExecutionID: leaf.ExecutionID, Data: map[string]any{"event_id": "go"}})
	require.NoError(t, err)
	b.waitFor(t, leaf.ExecutionID, terminal)
	require.Zero(t, b.sweep(t, retention.Config{}).Removed[retention.TableExecutions], "the leaf has not expired yet")
	b.age(t, leaf.ExecutionID, week+time.Hour)
	require.EqualValues(t, 3, b.sweep(t, retention.Config{}).Removed[retention.TableExecutions])
	for _, id := range []string{root.ExecutionID, mid.ExecutionID, leaf.ExecutionID} {
		require.False(t, b.exists(t, id), id)
	}
}

// An ended execution that a restart came from stays while the restart is
// kept (it waits here), and goes with it once the restart has expired too.
func TestSweepKeepsTheSourceOfARestart(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, `{"workflow_id": "leaf", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "wait"},
	  {"id": "wait", "type": "action", "actionType": "wait_for_event", "parameters": {"event_id": "go"}, "next": "end"},
	  {"id": "end", "type": "end"}]}`)
	old := b.start(t, engine.StartParams{WorkflowID: "leaf"})
	b.waitFor(t, old.ExecutionID, waiting)
	var fresh *engine.Execution
	require.NoError(t, b.engine.WithTx(context.Background(), func(tx pgx.Tx) error {
		var err error
		fresh, err = b.engine.RestartTx(context.Background(), tx, b.tenant, old.ExecutionID, "test", "")
		return err
	}))
	b.waitFor(t, old.ExecutionID, terminal)
	b.waitFor(t, fresh.ExecutionID, waiting)
	b.age(t, old.ExecutionID, week+time.Hour)

	require.Zero(t, b.sweep(t, retention.Config{}).Total())
	require.True(t, b.exists(t, old.ExecutionID))

	_, err := b.engine.Cancel(context.Background(), b.tenant, fresh.ExecutionID, "test", "done")
	require.NoError(t, err)
	b.age(t, fresh.ExecutionID, week+time.Hour)
	require.EqualValues(t, 2, b.sweep(t, retention.Config{}).Removed[retention.TableExecutions])
	require.False(t, b.exists(t, old.ExecutionID))
	require.False(t, b.exists(t, fresh.ExecutionID))
}

// An ended execution recorded as holding its thread's lock stays (a lock
// left behind by a process that died between the end and the release,
// which the lock reaper clears); once the lock is cleared it goes.
func TestSweepKeepsARecordedLockHolder(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, talk)
	x := b.waitFor(t, b.start(t, engine.StartParams{WorkflowID: "talk", ThreadID: "locked"}).ExecutionID, terminal)
	require.Eventually(t, func() bool { return b.deliveredOf(t, x.ID) == 1 }, 20*time.Second, 20*time.Millisecond)
	_, err := b.pool.Exec(context.Background(), `UPDATE thread SET active_execution_id = $1, execution_locked_at = now()
		WHERE tenant_id = $2 AND thread_id = 'locked'`, x.ID, b.tenant)
	require.NoError(t, err)
	b.age(t, x.ExecutionID, week+time.Hour)

	require.Zero(t, b.sweep(t, retention.Config{}).Total())
	require.True(t, b.exists(t, x.ExecutionID))

	cleared, err := b.engine.ReapLocks(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"locked"}, cleared[b.tenant])
	require.EqualValues(t, 1, b.sweep(t, retention.Config{}).Removed[retention.TableExecutions])
	require.False(t, b.exists(t, x.ExecutionID))
}

// Outbound messages are delivered after their run ends: an ended execution
// whose message the channel has not taken yet stays until it is delivered.
func TestSweepKeepsAnExecutionWithUndeliveredMessages(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, talk)
	b.channel.failing.Store(true)
	x := b.waitFor(t, b.start(t, engine.StartParams{WorkflowID: "talk", ThreadID: "down"}).ExecutionID, terminal)
	require.Eventually(t, func() bool {
		return count(t, b.pool, `SELECT count(*) FROM thread_message WHERE execution_id = $1 AND status = 'pending' AND attempts > 0`, x.ID) == 1
	}, 20*time.Second, 20*time.Millisecond)
	b.age(t, x.ExecutionID, week+time.Hour)

	require.Zero(t, b.sweep(t, retention.Config{}).Total())
	require.True(t, b.exists(t, x.ExecutionID))

	b.channel.failing.Store(false)
	require.Eventually(t, func() bool { return b.deliveredOf(t, x.ID) == 1 }, 30*time.Second, 20*time.Millisecond)
	require.EqualValues(t, 1, b.sweep(t, retention.Config{}).Removed[retention.TableExecutions])
	require.False(t, b.exists(t, x.ExecutionID))
}

// A thread with queued messages keeps them and their senders: agent B
// ends while A holds the thread, its message queued behind A's lock. B,
// past retention, stays with its queued message until the lock passes and
// the message is delivered.
func TestSweepKeepsQueuedMessagesAndTheirSenders(t *testing.T) {
	t.Parallel()
	g := newGate()
	b := setup(t, setupOpts{tools: map[string]engine.ToolFunc{"gate": g.tool}})
	b.define(t, `{"workflow_id": "holder", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "say"},
	  {"id": "say", "type": "action", "actionType": "send_message", "parameters": {"message": "A"}, "next": "hold"},
	  {"id": "hold", "type": "task", "task": "gate", "inputs": {"key": "a"}, "next": "end"},
	  {"id": "end", "type": "end"}]}`)
	b.define(t, talk)
	a := b.start(t, engine.StartParams{WorkflowID: "holder", ThreadID: "busy"})
	g.entered(t, "a")
	other := b.waitFor(t, b.start(t, engine.StartParams{WorkflowID: "talk", ThreadID: "busy"}).ExecutionID, terminal)
	require.Equal(t, 1, count(t, b.pool, `SELECT count(*) FROM thread_message WHERE execution_id = $1 AND status = 'queued'`, other.ID))
	b.age(t, other.ExecutionID, week+time.Hour)

	require.Zero(t, b.sweep(t, retention.Config{}).Total())
	require.True(t, b.exists(t, other.ExecutionID))
	require.Equal(t, 1, count(t, b.pool, `SELECT count(*) FROM thread_message WHERE execution_id = $1 AND status = 'queued'`, other.ID))

	g.release("a")
	b.waitFor(t, a.ExecutionID, terminal)
	require.Eventually(t, func() bool { return b.deliveredOf(t, other.ID) == 1 }, 20*time.Second, 20*time.Millisecond)
	require.EqualValues(t, 1, b.sweep(t, retention.Config{}).Removed[retention.TableExecutions])
	require.False(t, b.exists(t, other.ExecutionID))
	require.True(t, b.exists(t, a.ExecutionID), "A has not expired")
}

// Inbound messages queued for a session's next run stay, message_id
// included, however old; dropped ones and /queue commands go once past
// inbound retention, and their message_ids once past the replay window.
func TestSweepKeepsQueuedInboundMessages(t *testing.T) {
	t.Parallel()
	g := newGate()
	b := setup(t, setupOpts{tools: map[string]engine.ToolFunc{"gate": g.tool}})
	b.define(t, `{"workflow_id": "agent", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "hold"},
	  {"id": "hold", "type": "task", "task": "gate", "inputs": {"key": "s"}, "next": "end"},
	  {"id": "end", "type": "end"}]}`)
	b.thread(t, "s", "agent")
	require.Equal(t, engine.OutcomeCommand, b.inbound(t, "s", "/queue collect cap:1 drop:new", "cmd").Outcome)
	require.Equal(t, engine.OutcomeStarted, b.inbound(t, "s", "hola", "m1").Outcome)
	g.entered(t, "s")
	require.Equal(t, engine.OutcomeQueued, b.inbound(t, "s", "uno", "m2").Outcome)
	require.Equal(t, engine.OutcomeDropped, b.inbound(t, "s", "dos", "m3").Outcome)
	_, err := b.pool.Exec(context.Background(), `UPDATE thread_message SET created_at = created_at - interval '30 days'
		WHERE tenant_id = $1 AND direction = 'in'`, b.tenant)
	require.NoError(t, err)

	res := b.sweep(t, retention.Config{})
	// The command and the dropped message go; the consumed one stays with
	// its live execution, message_id forgotten; the queued one stays whole.
	require.Equal(t, map[string]int64{retention.TableMessages: 2, retention.MessageIDs: 1}, res.Removed)
	require.Equal(t, []string{"received m2", "consumed "}, inboundLeft(t, b))
	g.release("s")
}

// inboundLeft lists the tenant's inbound messages as "status message_id".
func inboundLeft(t *testing.T, b *bundle) []string {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT status || ' ' || coalesce(external_id, '') FROM thread_message
		WHERE tenant_id = $1 AND direction = 'in' ORDER BY status DESC`, b.tenant)
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}

// A tenant's own periods replace the default ones: "off" keeps its
// executions forever, and another tenant's shorter period removes its
// recent ones.
func TestSweepPerTenantPeriods(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	keeper, brief := b.tenant, b.tenant+"-brief"
	ended := map[string]string{}
	for _, tenant := range []string{keeper, brief} {
		b.tenant = tenant
		b.define(t, talk)
		x := b.waitFor(t, b.start(t, engine.StartParams{WorkflowID: "talk"}).ExecutionID, terminal)
		require.Eventually(t, func() bool { return b.deliveredOf(t, x.ID) == 1 }, 20*time.Second, 20*time.Millisecond)
		ended[tenant] = x.ExecutionID
	}
	b.tenant = keeper
	b.age(t, ended[keeper], 30*24*time.Hour)
	cfg := retention.Config{PerTenant: map[string]retention.Policy{
		keeper: {Executions: 0, Idempotency: day, Inbound: week},
		brief:  {Executions: time.Millisecond, Idempotency: day, Inbound: week},
	}}
	require.EqualValues(t, 1, b.sweep(t, cfg).Removed[retention.TableExecutions])
	require.True(t, b.exists(t, ended[keeper]))
	b.tenant = brief
	require.False(t, b.exists(t, ended[brief]))
}
