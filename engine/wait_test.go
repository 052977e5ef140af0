package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
)

// waitWorkflow is start → hello → w (a wait node given as JSON) → bye → end.
func waitWorkflow(id, waitNode string) string {
	return fmt.Sprintf(`{
  "workflow_id": %q, "version": "1.0.0",
  "nodes": [
    {"id": "start", "type": "start", "next": "hello"},
    {"id": "hello", "type": "action", "actionType": "send_message", "parameters": {"message": "Hola"}, "next": "w"},
    %s,
    {"id": "bye", "type": "action", "actionType": "send_message", "parameters": {"message": "Adiós {{lastResponse}} timedOut={{timedOut}}"}, "next": "end"},
    {"id": "end", "type": "end", "result": {"summary": "Listo"}}
  ]}`, id, waitNode)
}

func waiting(x *engine.Execution) bool { return x.Status == engine.StatusWaiting }

func bodies(ms []engine.OutboundMessage) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.Body)
	}
	return out
}

func TestWaitForResponseEntersWaitingAndResumes(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, waitWorkflow("resp", `{"id": "w", "type": "action", "actionType": "wait_for_response",
	  "parameters": {"timeout": "{{wait}}", "onTimeout": "continue", "expectedFrom": "postulant"}, "next": "bye"}`))
	x := b.start(t, engine.StartParams{WorkflowID: "resp", ThreadID: "t-resp", Input: map[string]any{"wait": "2h"}})
	w := b.waitFor(t, x.ExecutionID, waiting)
	require.Equal(t, "response", *w.WaitingFor)
	require.WithinDuration(t, time.Now().Add(2*time.Hour), *w.WaitingUntil, time.Minute)
	var wd map[string]any
	require.NoError(t, json.Unmarshal(w.WaitingData, &wd))
	require.Equal(t, "t-resp", wd["threadId"])
	require.Equal(t, "postulant", wd["expectedFrom"])
	require.Equal(t, "2h", wd["timeout"])
	require.Equal(t, []string{"start", "hello", "w"}, w.NodePath)
	require.Equal(t, 1, countRows(t, b.pool, `SELECT count(*) FROM river_job WHERE kind = 'execution.wait_timeout' AND args->>'execution_id' = $1::text`, fmt.Sprint(x.ID)))

	res, err := b.engine.PublishEvent(context.Background(), engine.PublishEventParams{TenantID: b.tenant,
		EventType: engine.EventTypeMessageReceived, EventID: "ev-1", ExecutionID: x.ExecutionID, Data: map[string]any{"text": "sí"}})
	require.NoError(t, err)
	require.Equal(t, []string{x.ExecutionID}, res.Resumed)
	done := b.waitFor(t, x.ExecutionID, terminal)
	require.Equal(t, engine.StatusCompleted, done.Status)
	require.Equal(t, "sí", done.Variables["lastResponse"])
	require.Equal(t, false, done.Variables["timedOut"])
	require.Equal(t, []string{"start", "hello", "w", "bye", "end"}, done.NodePath)
	require.Eventually(t, func() bool { return len(b.channel.Messages()) == 2 }, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, []string{"Hola", "Adiós sí timedOut=false"}, bodies(b.channel.Messages()))

	logs, err := b.engine.Logs(context.Background(), b.pool, b.tenant, x.ExecutionID, 0, 100)
	require.NoError(t, err)
	var msgs []string
	for _, l := range logs {
		msgs = append(msgs, l.Message)
	}
	require.Contains(t, msgs, "Execution "+x.ExecutionID+" entering WAITING state (waitingFor: response)")
	require.Contains(t, msgs, "Resuming execution "+x.ExecutionID)

	// The same event id again replays the answer; another event is refused.
	res, err = b.engine.PublishEvent(context.Background(), engine.PublishEventParams{TenantID: b.tenant,
		EventType: engine.EventTypeMessageReceived, EventID: "ev-1", ExecutionID: x.ExecutionID, Data: map[string]any{"text": "otra"}})
	require.NoError(t, err)
	require.True(t, res.Replayed)
	require.Equal(t, []string{x.ExecutionID}, res.Resumed)
	_, err = b.engine.PublishEvent(context.Background(), engine.PublishEventParams{TenantID: b.tenant,
		EventType: engine.EventTypeMessageReceived, EventID: "ev-2", ExecutionID: x.ExecutionID, Data: map[string]any{"text": "otra"}})
	var ce *engine.ConflictError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, engine.CodeEventNotWaiting, ce.Code)
}

func TestTemplatedTimeoutOverMaxFails(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, waitWorkflow("overmax", `{"id": "w", "type": "action", "actionType": "wait_for_response",
	  "parameters": {"timeout": "{{wait}}"}, "next": "bye"}`))
	x := b.start(t, engine.StartParams{WorkflowID: "overmax", Input: map[string]any{"wait": "8d"}})
	done := b.waitFor(t, x.ExecutionID, terminal)
	require.Equal(t, engine.StatusFailed, done.Status)
	require.Equal(t, "w", *done.FailedNodeID)
	require.Contains(t, *done.ErrorMessage, "timeout 8d is over the maximum of 7d for a response wait")
}

func TestTimeoutPolicies(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	node := func(policy, extra string) string {
		return fmt.Sprintf(`{"id": "w", "type": "action", "actionType": "wait_for_response",
		  "parameters": {"timeout": "1s", %s "timeoutActions": [
		    {"actionType": "send_message", "parameters": {"message": "No recibimos tu respuesta, {{name}}"}},
		    {"actionType": "set_variables", "parameters": {"values": {"reminded": true}}}]%s}, "next": "bye"}`, policy, extra)
	}
	b.define(t, waitWorkflow("p-continue", node(`"onTimeout": "continue",`, "")))
	b.define(t, waitWorkflow("p-fail", node(`"onTimeout": "fail",`, "")))
	b.define(t, waitWorkflow("p-missing", node("", "")))
	b.define(t, waitWorkflow("p-retry", node(`"onTimeout": "retry",`, `, "maxRetries": 2`)))

	type outcome struct {
		x       *engine.Execution
		started time.Time
	}
	start := func(wf string) outcome {
		thread := "thread-" + wf
		return outcome{x: b.start(t, engine.StartParams{WorkflowID: wf, ThreadID: thread, Input: map[string]any{"name": "Ana"}}), started: time.Now()}
	}
	cont, fail, missing, retry := start("p-continue"), start("p-fail"), start("p-missing"), start("p-retry")

	x := b.waitFor(t, cont.x.ExecutionID, terminal)
	require.Equal(t, engine.StatusCompleted, x.Status)
	require.Equal(t, true, x.Variables["timedOut"])
	require.Equal(t, true, x.Variables["reminded"])
	require.Equal(t, []string{"start", "hello", "w", "bye", "end"}, x.NodePath)

	for _, o := range []outcome{fail, missing} {
		x := b.waitFor(t, o.x.ExecutionID, terminal)
		require.Equal(t, engine.StatusTimeout, x.Status, o.x.ExecutionID)
		require.Equal(t, "timeout", *x.ResultType)
		require.Equal(t, "Timeout esperando respuesta del usuario", *x.ResultSummary)
		require.Nil(t, x.WaitingFor)
	}

	// retry: three waits of 1 s (the first and two retries), then timeout;
	// the timeout actions ran after each.
	x = b.waitFor(t, retry.x.ExecutionID, terminal)
	require.Equal(t, engine.StatusTimeout, x.Status)
	elapsed := time.Since(retry.started)
	require.Greater(t, elapsed, 3*time.Second)
	require.Less(t, elapsed, 8*time.Second)
	require.Equal(t, 3, countRows(t, b.pool, `SELECT count(*) FROM river_job WHERE kind = 'execution.wait_timeout' AND args->>'execution_id' = $1::text`, fmt.Sprint(retry.x.ID)))

	require.Eventually(t, func() bool {
		return countRows(t, b.pool, `SELECT count(*) FROM thread_message WHERE status = 'delivered' AND body LIKE 'No recibimos%'`) == 6
	}, 10*time.Second, 20*time.Millisecond)
	perThread := map[string][]string{}
	for _, m := range b.channel.Messages() {
		perThread[m.ThreadID] = append(perThread[m.ThreadID], m.Body)
	}
	reminder := "No recibimos tu respuesta, Ana"
	require.Equal(t, []string{"Hola", reminder, "Adiós  timedOut=true"}, perThread["thread-p-continue"])
	require.Equal(t, []string{"Hola", reminder}, perThread["thread-p-fail"])
	require.Equal(t, []string{"Hola", reminder}, perThread["thread-p-missing"])
	require.Equal(t, []string{"Hola", reminder, reminder, reminder}, perThread["thread-p-retry"])
}

// TestTimeoutFiresOnTime measures how late a 2 s timeout fires: River's
// scheduler alone would make it up to 5 s late.
func TestTimeoutFiresOnTime(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, waitWorkflow("ontime", `{"id": "w", "type": "action", "actionType": "wait_for_response",
	  "parameters": {"timeout": "2s", "onTimeout": "fail"}, "next": "bye"}`))
	x := b.start(t, engine.StartParams{WorkflowID: "ontime"})
	w := b.waitFor(t, x.ExecutionID, waiting)
	done := b.waitFor(t, x.ExecutionID, terminal)
	require.Equal(t, engine.StatusTimeout, done.Status)
	late := done.CompletedAt.Sub(*w.WaitingUntil)
	t.Logf("timeout fired %s after waiting_until", late)
	require.GreaterOrEqual(t, late, time.Duration(0))
	require.Less(t, late, time.Second)
}

func TestDelayContinuesAtItsTime(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, waitWorkflow("delay", `{"id": "w", "type": "action", "actionType": "delay", "parameters": {"duration": "1s"}, "next": "bye"}`))
	b.define(t, waitWorkflow("until", `{"id": "w", "type": "action", "actionType": "delay", "parameters": {"until": "{{at}}"}, "next": "bye"}`))
	x := b.start(t, engine.StartParams{WorkflowID: "delay"})
	at := time.Now().Add(1500 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	y := b.start(t, engine.StartParams{WorkflowID: "until", Input: map[string]any{"at": at}})
	// Both waits are seen first: watching one run to its end could let the
	// other's short wait pass unseen on a loaded machine.
	var waits []*engine.Execution
	for _, id := range []string{x.ExecutionID, y.ExecutionID} {
		w := b.waitFor(t, id, waiting)
		require.Equal(t, "delay", *w.WaitingFor)
		waits = append(waits, w)
	}
	for _, w := range waits {
		done := b.waitFor(t, w.ExecutionID, terminal)
		require.Equal(t, engine.StatusCompleted, done.Status)
		require.Equal(t, false, done.Variables["timedOut"])
		require.False(t, done.CompletedAt.Before(*w.WaitingUntil))
	}
}

// TestLateTimeoutAfterResumeDoesNothing runs the timeout of a wait that has
// already been resumed: it must change nothing.
func TestLateTimeoutAfterResumeDoesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{insertOnly: true})
	b.define(t, waitWorkflow("late", `{"id": "w", "type": "action", "actionType": "wait_for_response", "parameters": {"onTimeout": "fail"}, "next": "bye"}`))
	x := b.start(t, engine.StartParams{WorkflowID: "late"})
	runSteps(t, b, x.ID)
	w := b.get(t, x.ExecutionID)
	require.Equal(t, engine.StatusWaiting, w.Status)
	waitSeq := currentWaitSeq(t, b, x.ID)

	_, err := b.engine.PublishEvent(context.Background(), engine.PublishEventParams{TenantID: b.tenant,
		EventType: engine.EventTypeMessageReceived, EventID: "late-1", ExecutionID: x.ExecutionID, Data: map[string]any{"text": "hola"}})
	require.NoError(t, err)
	before := b.get(t, x.ExecutionID)
	completed := false
	require.NoError(t, b.engine.HandleWaitTimeout(context.Background(), x.ID, waitSeq, func(context.Context, pgx.Tx) error {
		completed = true
		return nil
	}))
	require.True(t, completed, "the stale timeout job completes")
	require.Equal(t, engine.StatusCompleted, before.Status, "the event's transaction ran the settling rest of the run")
	after := b.get(t, x.ExecutionID)
	require.Equal(t, before.Status, after.Status)
	require.Equal(t, before.StepSeq, after.StepSeq)
	require.Equal(t, before.UpdatedAt, after.UpdatedAt)
}

// TestResumeRacesTimeout runs an event and the wait's timeout at the same
// time, 100 times: exactly one wins each time and the step runs once.
func TestResumeRacesTimeout(t *testing.T) {
	t.Parallel()
	// Lanes are not under test here: room for every run the test leaves running.
	b := setup(t, setupOpts{insertOnly: true, laneLimits: map[string]int{"main": 1000}})
	b.define(t, waitWorkflow("race", `{"id": "w", "type": "action", "actionType": "wait_for_response", "parameters": {"onTimeout": "fail"}, "next": "bye"}`))
	resumed, timedOut := 0, 0
	for i := range 100 {
		x := b.start(t, engine.StartParams{WorkflowID: "race"})
		runSteps(t, b, x.ID)
		waitSeq := currentWaitSeq(t, b, x.ID)
		var wg sync.WaitGroup
		var evErr, toErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, evErr = b.engine.PublishEvent(context.Background(), engine.PublishEventParams{TenantID: b.tenant,
				EventType: engine.EventTypeMessageReceived, EventID: fmt.Sprintf("race-%d", i), ExecutionID: x.ExecutionID, Data: map[string]any{"text": "hola"}})
		}()
		go func() {
			defer wg.Done()
			toErr = b.engine.HandleWaitTimeout(context.Background(), x.ID, waitSeq, func(context.Context, pgx.Tx) error { return nil })
		}()
		wg.Wait()
		require.NoError(t, toErr)
		got := b.get(t, x.ExecutionID)
		switch got.Status {
		case engine.StatusRunning:
			// The event won but found the thread row held by the timeout's
			// transaction: one step job for the resumed checkpoint, none twice.
			require.NoError(t, evErr)
			resumed++
			require.Equal(t, 1, countRows(t, b.pool, `SELECT count(*) FROM river_job WHERE kind = 'execution.step' AND args->>'execution_id' = $1::text AND (args->>'step_seq')::bigint = $2`, fmt.Sprint(x.ID), got.StepSeq))
			require.Equal(t, 1, countRows(t, b.pool, `SELECT count(*) FROM execution_event WHERE execution_id = $1 AND action = $2`, x.ID, engine.EventResumed))
			require.Equal(t, 0, countRows(t, b.pool, `SELECT count(*) FROM execution_event WHERE execution_id = $1 AND action = $2`, x.ID, engine.EventCompleted))
		case engine.StatusCompleted:
			// The event won and ran the rest in its transaction: no step job.
			require.NoError(t, evErr)
			resumed++
			require.Equal(t, 0, countRows(t, b.pool, `SELECT count(*) FROM river_job WHERE kind = 'execution.step' AND args->>'execution_id' = $1::text AND (args->>'step_seq')::bigint > 1`, fmt.Sprint(x.ID)))
			require.Equal(t, 1, countRows(t, b.pool, `SELECT count(*) FROM execution_event WHERE execution_id = $1 AND action = $2`, x.ID, engine.EventResumed))
			require.Equal(t, 1, countRows(t, b.pool, `SELECT count(*) FROM execution_event WHERE execution_id = $1 AND action = $2`, x.ID, engine.EventCompleted))
		case engine.StatusTimeout:
			var ce *engine.ConflictError
			require.ErrorAs(t, evErr, &ce)
			require.Equal(t, engine.CodeEventNotWaiting, ce.Code)
			timedOut++
			require.Equal(t, 0, countRows(t, b.pool, `SELECT count(*) FROM execution_event WHERE execution_id = $1 AND action = $2`, x.ID, engine.EventResumed))
			require.Equal(t, 1, countRows(t, b.pool, `SELECT count(*) FROM execution_event WHERE execution_id = $1 AND action = $2`, x.ID, engine.EventCompleted))
		default:
			t.Fatalf("run %d: unexpected status %s", i, got.Status)
		}
	}
	t.Logf("resume won %d times, timeout won %d times", resumed, timedOut)
	require.Equal(t, 100, resumed+timedOut)
}

// runSteps works the execution's pending step jobs by hand (insert-only
// clients), until it stops running.
func runSteps(t *testing.T, b *testBundle, id int64) {
	t.Helper()
	for range 10 {
		var seq int64
		var status string
		require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT step_seq, status::text FROM agent_execution WHERE id = $1`, id).Scan(&seq, &status))
		if status != "running" {
			return
		}
		require.NoError(t, b.engine.RunStep(context.Background(), id, seq, func(context.Context, pgx.Tx) error { return nil }))
	}
	t.Fatalf("execution %d kept running", id)
}

func currentWaitSeq(t *testing.T, b *testBundle, id int64) int32 {
	t.Helper()
	var seq int32
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT wait_seq FROM agent_execution WHERE id = $1`, id).Scan(&seq))
	return seq
}

// logBuffer collects JSON log lines from any goroutine.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, raw := range bytes.Split(l.buf.Bytes(), []byte("\n")) {
		if len(raw) == 0 {
			continue
		}
		var line map[string]any
		require.NoError(t, json.Unmarshal(raw, &line))
		out = append(out, line)
	}
	return out
}

// The lifecycle log lines go through slog with the execution, thread and
// tenant: entering WAITING, resuming, continuing from the checkpoint, and
// completed with its result.
func TestLifecycleLogLines(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	b := setup(t, setupOpts{logger: slog.New(slog.NewJSONHandler(logs, nil))})
	b.define(t, waitWorkflow("logged", `{"id": "w", "type": "action", "actionType": "wait_for_event",
	  "parameters": {"event_id": "go", "timeout": "1h"}, "next": "bye"}`))
	x := b.start(t, engine.StartParams{WorkflowID: "logged", ThreadID: "th-logged"})
	b.waitFor(t, x.ExecutionID, waiting)
	b.publish(t, engine.PublishEventParams{TenantID: b.tenant, EventType: engine.EventTypeEventCompleted, EventID: "ev-logged",
		ExecutionID: x.ExecutionID, Data: map[string]any{"event_id": "go"}})
	require.Equal(t, engine.StatusCompleted, b.waitFor(t, x.ExecutionID, terminal).Status)

	want := []string{
		fmt.Sprintf("Execution %s entering WAITING state (waitingFor: event)", x.ExecutionID),
		fmt.Sprintf("Resuming execution %s", x.ExecutionID),
		"Continuing from checkpoint",
		fmt.Sprintf("Execution %s completed with result: success", x.ExecutionID),
	}
	var got []string
	for _, line := range logs.lines(t) {
		msg, _ := line["msg"].(string)
		if !slices.Contains(want, msg) {
			continue
		}
		got = append(got, msg)
		require.Equal(t, x.ExecutionID, line["execution_id"], msg)
		require.Equal(t, b.tenant, line["tenant_id"], msg)
		require.NotNil(t, line["thread_id"], msg)
	}
	require.Equal(t, want, got)
}
