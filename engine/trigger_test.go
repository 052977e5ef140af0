package engine_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
)

func (b *testBundle) defineFile(t *testing.T, path string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		t.Skipf("%s is not beside this checkout", path)
	}
	require.NoError(t, err)
	b.define(t, string(raw))
}

func (b *testBundle) publish(t *testing.T, p engine.PublishEventParams) *engine.EventResult {
	t.Helper()
	p.TenantID = b.tenant
	res, err := b.engine.PublishEvent(context.Background(), p)
	require.NoError(t, err)
	return res
}

// The examples/ story of chained agents: the coordinator greets
// Maria and triggers the document collector with waitForCompletion; the
// collector inherits the lock, asks for the INE, waits for the upload,
// thanks, ends and hands the lock back; the coordinator goes on. An
// independent evaluator that talks meanwhile is queued until the
// coordinator ends.
func TestLockScenarioChainedAgents(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.defineFile(t, "../examples/coordinator.json")
	b.defineFile(t, "../examples/document-collector.json")
	b.defineFile(t, "../examples/evaluator.json")

	coord := b.start(t, engine.StartParams{WorkflowID: "recruiting-coordinator", ThreadID: "maria", Input: map[string]any{"name": "Maria"}})
	waiting := b.waitFor(t, coord.ExecutionID, func(x *engine.Execution) bool { return x.Status == engine.StatusWaiting })
	require.Equal(t, "agent", *waiting.WaitingFor)
	childID := waiting.Variables["triggeredExecutionId"].(string)
	child := b.waitFor(t, childID, func(x *engine.Execution) bool { return x.Status == engine.StatusWaiting })
	require.Equal(t, "document", *child.WaitingFor)
	require.Equal(t, coord.ExecutionID, *child.ParentExecutionID)
	require.Equal(t, "subagent", child.Lane)
	require.Equal(t, []string{"Hola Maria, iniciamos tu proceso", "Necesito tu INE"}, b.waitDelivered(t, "maria", 2))
	// The collector holds the inherited lock.
	require.Equal(t, 1, countRows(t, b.pool, `SELECT count(*) FROM monitor_active_locks WHERE active_execution_id = $1`, childID))

	// The evaluator talks now: queued behind the coordinator's family.
	eval := b.start(t, engine.StartParams{WorkflowID: "evaluator", ThreadID: "maria"})
	b.waitFor(t, eval.ExecutionID, func(x *engine.Execution) bool { return x.Status == engine.StatusWaiting })
	require.Equal(t, 2, countRows(t, b.pool, `SELECT count(*) FROM thread_message WHERE execution_id = $1 AND status = 'queued'`, eval.ID))

	res := b.publish(t, engine.PublishEventParams{EventType: "DOCUMENT_UPLOADED", EventID: "ine-1", ExecutionID: childID,
		Data: map[string]any{"document_type": "INE", "url": "https://files.example/ine.pdf"}})
	require.Equal(t, []string{childID}, res.Resumed)

	done := b.waitFor(t, coord.ExecutionID, terminal)
	require.Equal(t, engine.StatusCompleted, done.Status)
	require.Equal(t, true, done.Variables["childExecutionSuccess"])
	require.Equal(t, "completed", done.Variables["childExecutionStatus"])
	require.Equal(t, childID, done.Variables["triggeredExecutionId"])
	require.Equal(t, []string{"start", "greet", "collect", "check", "next_step", "end"}, done.NodePath)
	require.Equal(t, []string{
		"Hola Maria, iniciamos tu proceso",
		"Necesito tu INE",
		"Documento recibido",
		"Siguiente paso: te enviaremos una evaluacion",
		"Tienes una evaluacion pendiente",
		"El test tiene 30 preguntas. ¿Puedes hacerlo hoy?",
	}, b.waitDelivered(t, "maria", 6))
	// The evaluator took the lock through the drain and still waits for an answer.
	require.Equal(t, 1, countRows(t, b.pool, `SELECT count(*) FROM monitor_active_locks WHERE active_execution_id = $1`, eval.ExecutionID))
	_, err := b.engine.Cancel(context.Background(), b.tenant, eval.ExecutionID, "user", "test over")
	require.NoError(t, err)
}

// Three levels: a grandchild inherits through child and parent, and each
// level gets the lock back when the one below ends.
func TestLockInheritanceThreeLevels(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	level := func(id, say, child, after string) string {
		nodes := `{"id": "start", "type": "start", "next": "say"},
		  {"id": "say", "type": "action", "actionType": "send_message", "parameters": {"message": "` + say + `"}, "next": "next"},`
		if child != "" {
			nodes += `{"id": "next", "type": "action", "actionType": "trigger_agent", "parameters": {"workflow_id": "` + child + `", "waitForCompletion": true}, "next": "after"},`
		} else {
			nodes += `{"id": "next", "type": "action", "actionType": "wait_for_event", "parameters": {"event_id": "go"}, "next": "after"},`
		}
		nodes += `{"id": "after", "type": "action", "actionType": "send_message", "parameters": {"message": "` + after + `"}, "next": "end"},
		  {"id": "end", "type": "end"}`
		return `{"workflow_id": "` + id + `", "version": "1", "nodes": [` + nodes + `]}`
	}
	b.define(t, level("grandchild", "3 hola", "", "3 adios"))
	b.define(t, level("child", "2 hola", "grandchild", "2 adios"))
	b.define(t, level("parent", "1 hola", "child", "1 adios"))

	parent := b.start(t, engine.StartParams{WorkflowID: "parent", ThreadID: "t3"})
	require.Equal(t, []string{"1 hola", "2 hola", "3 hola"}, b.waitDelivered(t, "t3", 3))
	var grandchild string
	require.Eventually(t, func() bool {
		return b.pool.QueryRow(context.Background(), `SELECT execution_id FROM agent_execution WHERE workflow_id = 'grandchild' AND status = 'waiting'`).Scan(&grandchild) == nil
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, 1, countRows(t, b.pool, `SELECT count(*) FROM monitor_active_locks WHERE active_execution_id = $1`, grandchild))

	b.publish(t, engine.PublishEventParams{EventType: "EVENT_COMPLETED", EventID: "go-1", ExecutionID: grandchild, Data: map[string]any{"event_id": "go"}})
	require.Equal(t, engine.StatusCompleted, b.waitFor(t, parent.ExecutionID, terminal).Status)
	require.Equal(t, []string{"1 hola", "2 hola", "3 hola", "3 adios", "2 adios", "1 adios"}, b.waitDelivered(t, "t3", 6))
	require.Eventually(t, func() bool {
		return countRows(t, b.pool, `SELECT count(*) FROM thread WHERE thread_id = 't3' AND active_execution_id IS NULL`) == 1
	}, 10*time.Second, 20*time.Millisecond)
}

// Cancelling a parent cancels the child it waits for; the child's queued
// and pending work never speaks for it afterwards.
func TestCancelParentCancelsChild(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.defineFile(t, "../examples/coordinator.json")
	b.defineFile(t, "../examples/document-collector.json")
	coord := b.start(t, engine.StartParams{WorkflowID: "recruiting-coordinator", ThreadID: "c", Input: map[string]any{"name": "Ana"}})
	waiting := b.waitFor(t, coord.ExecutionID, func(x *engine.Execution) bool { return x.Status == engine.StatusWaiting })
	childID := waiting.Variables["triggeredExecutionId"].(string)
	b.waitFor(t, childID, func(x *engine.Execution) bool { return x.Status == engine.StatusWaiting })

	_, err := b.engine.Cancel(context.Background(), b.tenant, coord.ExecutionID, "user", "candidate withdrew")
	require.NoError(t, err)
	child := b.get(t, childID)
	require.Equal(t, engine.StatusCancelled, child.Status)
	require.Equal(t, "system", *child.CancelledBy)
	require.Equal(t, engine.StatusCancelled, b.get(t, coord.ExecutionID).Status)
	require.Equal(t, 1, countRows(t, b.pool, `SELECT count(*) FROM thread WHERE thread_id = 'c' AND active_execution_id IS NULL`))
}

// A parent whose agent wait times out goes on (onTimeout continue) and its
// child is cancelled.
func TestAgentWaitTimeoutCancelsChild(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.defineFile(t, "../examples/document-collector.json")
	b.define(t, `{"workflow_id": "impatient", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "collect"},
	  {"id": "collect", "type": "action", "actionType": "trigger_agent",
	   "parameters": {"workflow_id": "document-collector", "waitForCompletion": true, "timeout": "1s", "onTimeout": "continue"}, "next": "end"},
	  {"id": "end", "type": "end"}]}`)
	x := b.start(t, engine.StartParams{WorkflowID: "impatient", ThreadID: "i"})
	done := b.waitFor(t, x.ExecutionID, terminal)
	require.Equal(t, engine.StatusCompleted, done.Status)
	require.Equal(t, true, done.Variables["timedOut"])
	childID := done.Variables["triggeredExecutionId"].(string)
	require.Equal(t, engine.StatusCancelled, b.waitFor(t, childID, terminal).Status)
}

// Without waitForCompletion the parent carries on and the child may not
// inherit: its message queues until the parent ends.
func TestTriggerWithoutWaitDoesNotInherit(t *testing.T) {
	t.Parallel()
	g := newGate()
	b := setup(t, setupOpts{tools: map[string]engine.ToolFunc{"gate": g.tool}})
	b.define(t, `{"workflow_id": "kid", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "say"},
	  {"id": "say", "type": "action", "actionType": "send_message", "parameters": {"message": "kid"}, "next": "end"},
	  {"id": "end", "type": "end"}]}`)
	b.define(t, `{"workflow_id": "fire", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "say"},
	  {"id": "say", "type": "action", "actionType": "send_message", "parameters": {"message": "parent"}, "next": "spawn"},
	  {"id": "spawn", "type": "action", "actionType": "trigger_agent", "parameters": {"workflow_id": "kid", "waitForCompletion": false}, "next": "hold"},
	  {"id": "hold", "type": "task", "task": "gate", "inputs": {"key": "p"}, "next": "end"},
	  {"id": "end", "type": "end"}]}`)
	x := b.start(t, engine.StartParams{WorkflowID: "fire", ThreadID: "f"})
	g.waitEntered(t, "p")
	var kid string
	require.Eventually(t, func() bool {
		return b.pool.QueryRow(context.Background(), `SELECT execution_id FROM agent_execution WHERE workflow_id = 'kid' AND status = 'completed'`).Scan(&kid) == nil
	}, 10*time.Second, 20*time.Millisecond)
	// The parent's message goes out on its own; the ended child's stays
	// queued behind the parent's lock.
	require.Equal(t, []string{"parent"}, b.waitDelivered(t, "f", 1))
	require.Equal(t, 1, countRows(t, b.pool, `SELECT count(*) FROM thread_message m JOIN agent_execution x ON x.id = m.execution_id
	                                          WHERE x.execution_id = $1 AND m.status = 'queued'`, kid))
	require.Equal(t, []string{"parent"}, b.deliveredBodies(t, "f"))
	g.release("p")
	b.waitFor(t, x.ExecutionID, terminal)
	require.Equal(t, []string{"parent", "kid"}, b.waitDelivered(t, "f", 2))
}

// An event addressed to a running execution is kept (buffered) and applied
// when the execution next waits for that type.
func TestEventForRunningExecutionIsBuffered(t *testing.T) {
	t.Parallel()
	g := newGate()
	b := setup(t, setupOpts{tools: map[string]engine.ToolFunc{"gate": g.tool}})
	b.define(t, `{"workflow_id": "busy", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "work"},
	  {"id": "work", "type": "task", "task": "gate", "inputs": {"key": "w"}, "next": "sign"},
	  {"id": "sign", "type": "action", "actionType": "request_signature", "parameters": {"document_url": "https://files.example/contrato.pdf"}, "next": "wait"},
	  {"id": "wait", "type": "action", "actionType": "wait_for_event", "parameters": {"event_id": "entrevista"}, "next": "end"},
	  {"id": "end", "type": "end"}]}`)
	x := b.start(t, engine.StartParams{WorkflowID: "busy", ThreadID: "busy"})
	g.waitEntered(t, "w")

	// Both arrive while it runs its tool: the event for the later wait, then
	// the signature for the first one.
	res := b.publish(t, engine.PublishEventParams{EventType: "EVENT_COMPLETED", EventID: "ev-1", ExecutionID: x.ExecutionID, Data: map[string]any{"event_id": "entrevista", "room": "B"}})
	require.Equal(t, []string{x.ExecutionID}, res.Buffered)
	require.Empty(t, res.Resumed)
	res = b.publish(t, engine.PublishEventParams{EventType: "SIGNATURE_COMPLETED", EventID: "sig-1", ExecutionID: x.ExecutionID,
		Data: map[string]any{"signed_document_url": "https://files.example/firmado.pdf", "signed_at": "2026-11-22T10:00:00Z"}})
	require.Equal(t, []string{x.ExecutionID}, res.Buffered)
	// The same event_id again replays the first answer.
	again := b.publish(t, engine.PublishEventParams{EventType: "SIGNATURE_COMPLETED", EventID: "sig-1", ExecutionID: x.ExecutionID,
		Data: map[string]any{"signed_document_url": "https://files.example/firmado.pdf", "signed_at": "2026-11-22T10:00:00Z"}})
	require.Equal(t, res.Buffered, again.Buffered)

	g.release("w")
	done := b.waitFor(t, x.ExecutionID, terminal)
	require.Equal(t, engine.StatusCompleted, done.Status)
	require.Equal(t, "https://files.example/firmado.pdf", done.Variables["signedDocumentUrl"])
	require.Equal(t, "B", done.Variables["eventData"].(map[string]any)["room"])
	require.Equal(t, []string{"start", "work", "sign", "wait", "end"}, done.NodePath)

	// A finished execution takes no more events.
	_, err := b.engine.PublishEvent(context.Background(), engine.PublishEventParams{TenantID: b.tenant, EventType: "EVENT_COMPLETED", EventID: "ev-2",
		ExecutionID: x.ExecutionID, Data: map[string]any{"event_id": "entrevista"}})
	var ce *engine.ConflictError
	require.ErrorAs(t, err, &ce)
}

// Executions started at once on a thread that does not exist yet all start
// on one new thread: the first use creates it, the others wait for that
// insert and lock the row it made, whichever unique key they meet first.
func TestConcurrentFirstUseOfAThread(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, sender("hi", []string{"hola"}))
	for round := range 5 {
		thread := fmt.Sprintf("fresh-%d", round)
		var wg sync.WaitGroup
		errs := make([]error, 20)
		for i := range 20 {
			wg.Go(func() {
				errs[i] = b.engine.WithTx(context.Background(), func(tx pgx.Tx) error {
					_, err := b.engine.StartExecution(context.Background(), tx, engine.StartParams{TenantID: b.tenant, WorkflowID: "hi", ThreadID: thread})
					return err
				})
			})
		}
		wg.Wait()
		for i, err := range errs {
			require.NoError(t, err, "start %d on %s", i, thread)
		}
		require.Equal(t, 1, countRows(t, b.pool, `SELECT count(*) FROM thread WHERE tenant_id = $1 AND thread_id = $2`, b.tenant, thread))
	}
}

// Upserts of one new (channel, contact) at once all succeed on one thread,
// exactly one of them creating it; a thread id another contact has is a
// conflict.
func TestConcurrentThreadUpserts(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	for round := range 5 {
		contact := fmt.Sprintf("+52155500%02d", round)
		var wg sync.WaitGroup
		var created atomic.Int32
		errs := make([]error, 20)
		for i := range 20 {
			wg.Go(func() {
				errs[i] = b.engine.WithTx(context.Background(), func(tx pgx.Tx) error {
					th, isNew, err := b.engine.UpsertThread(context.Background(), tx, engine.ThreadUpsert{TenantID: b.tenant, ThreadID: "wa-" + contact,
						Channel: "whatsapp", Contact: contact})
					if err == nil && isNew {
						created.Add(1)
					}
					if err == nil && th.ThreadID != "wa-"+contact {
						return fmt.Errorf("got thread %s", th.ThreadID)
					}
					return err
				})
			})
		}
		wg.Wait()
		for i, err := range errs {
			require.NoError(t, err, "upsert %d of %s", i, contact)
		}
		require.EqualValues(t, 1, created.Load())
	}
	_, _, err := b.engine.UpsertThread(context.Background(), b.pool, engine.ThreadUpsert{TenantID: b.tenant, ThreadID: "wa-+5215550000",
		Channel: "web", Contact: "someone-else"})
	var conflict *engine.ConflictError
	require.ErrorAs(t, err, &conflict)
	require.Equal(t, "thread.upsert.thread_id_in_use", conflict.Code)
}

// A workflow that triggers itself (without waiting, so nothing holds it
// back) stops at limits.childDepth: the execution that would start the
// eleventh generation fails its trigger node instead.
func TestSelfTriggeringWorkflowStopsAtTheDepthLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, `{"workflow_id": "again", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "spawn"},
	  {"id": "spawn", "type": "action", "actionType": "trigger_agent", "parameters": {"workflow_id": "again", "waitForCompletion": false}, "next": "end"},
	  {"id": "end", "type": "end"}]}`)
	x := b.start(t, engine.StartParams{WorkflowID: "again"})
	const depth = 10 // limits.childDepth by default
	var failed struct {
		message string
		node    string
	}
	require.Eventually(t, func() bool {
		return b.pool.QueryRow(context.Background(), `SELECT error_message, failed_node_id FROM agent_execution
		  WHERE workflow_id = 'again' AND status = 'failed'`).Scan(&failed.message, &failed.node) == nil
	}, 20*time.Second, 20*time.Millisecond)
	require.Equal(t, "spawn", failed.node)
	require.Contains(t, failed.message, "limits.childDepth")
	b.waitFor(t, x.ExecutionID, terminal)
	require.Eventually(t, func() bool {
		return countRows(t, b.pool, `SELECT count(*) FROM agent_execution WHERE status NOT IN ('completed', 'failed')`) == 0
	}, 20*time.Second, 20*time.Millisecond)
	require.Equal(t, depth+1, countRows(t, b.pool, `SELECT count(*) FROM agent_execution WHERE workflow_id = 'again'`))
	require.Equal(t, depth, countRows(t, b.pool, `SELECT count(*) FROM agent_execution WHERE workflow_id = 'again' AND status = 'completed'`))
}
