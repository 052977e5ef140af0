package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/httpapi"
	"github.com/batonrun/baton/internal/pgtest"
	"github.com/batonrun/baton/metrics"
)

// TestMetricsAfterRuns drives executions step by step (nothing works the
// jobs, so every count is known) and reads /metrics without a token.
func TestMetricsAfterRuns(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDatabase(t)
	p := newProcess(t, dbURL, processOpts{tools: map[string]engine.ToolFunc{
		"ok": func(context.Context, engine.ToolCall) (map[string]any, error) {
			return map[string]any{"done": true}, nil
		},
		"broken": func(context.Context, engine.ToolCall) (map[string]any, error) {
			return nil, &engine.ToolError{Class: engine.ClassClient, Err: errors.New("boom")} // not retried
		},
	}})
	tenant := fmt.Sprintf("metrics-%d", tenantSeq.Add(1))
	for _, tool := range []string{"ok", "broken"} {
		p.define(t, tenant, fmt.Sprintf(`{"workflow_id":"m-%s","name":"M","version":"1.0.0","nodes":[
		 {"id":"start","type":"start","next":"call"},
		 {"id":"call","type":"task","task":%q,"next":"end"},
		 {"id":"end","type":"end","result":{"summary":"ok"}}]}`, tool, tool))
	}
	good := p.start(t, engine.StartParams{TenantID: tenant, WorkflowID: "m-ok"})
	bad := p.start(t, engine.StartParams{TenantID: tenant, WorkflowID: "m-broken"})

	// Before any step: two running executions, two step jobs waiting.
	out := scrape(t, p)
	require.Contains(t, out, fmt.Sprintf(`workflow_active_executions{action="execute",domain="workflow",status="running",tenant_id=%q} 2`, tenant))
	require.Contains(t, out, `workflow_queue_depth{action="queue",domain="workflow",queue="high"} 2`)
	require.Contains(t, out, `baton_lane_limit{lane="main"} 4`)
	require.Contains(t, out, `baton_lane_running{lane="main"} 2`)
	require.Contains(t, out, `baton_lane_pending{lane="main"} 0`)

	// The first step of the good run is a retry (attempt 2); each run
	// needs two steps: start, then the task and the end.
	step(t, p, good.ID, 2)
	step(t, p, good.ID, 1)
	step(t, p, bad.ID, 1)
	step(t, p, bad.ID, 1)

	out = scrape(t, p)
	for _, line := range []string{
		`workflow_execute_duration_ms_count{action="execute",domain="workflow",workflow_id="m-ok"} 1`,
		`workflow_execute_duration_ms_count{action="execute",domain="workflow",workflow_id="m-broken"} 1`,
		`workflow_step_duration_ms_count{action="step",domain="workflow",step_id="start",workflow_id="m-ok"} 1`,
		`workflow_step_duration_ms_count{action="step",domain="workflow",step_id="call",workflow_id="m-ok"} 1`,
		`workflow_step_duration_ms_count{action="step",domain="workflow",step_id="end",workflow_id="m-ok"} 1`,
		`workflow_step_duration_ms_count{action="step",domain="workflow",step_id="start",workflow_id="m-broken"} 1`,
		`workflow_error_count{action="execute",domain="tool",error_code="tool.execute.failed"} 1`,
		`workflow_retry_count{action="step",domain="workflow",step_id="start",workflow_id="m-ok"} 1`,
		// Two first-step jobs plus the two steps they enqueued: this test
		// runs steps directly and completes no job.
		`workflow_queue_depth{action="queue",domain="workflow",queue="high"} 4`,
		// Each tool's breaker, in this process: closed, none failing in a row
		// (a 4xx is the caller's fault and does not count).
		`baton_tool_breaker_state{state="closed",tool="ok"} 1`,
		`baton_tool_breaker_state{state="open",tool="broken"} 0`,
		`baton_tool_breaker_consecutive_failures{tool="broken"} 0`,
	} {
		require.Contains(t, out, line, "metrics:\n%s", workflowLines(out))
	}
	require.NotContains(t, out, `step_id="call",workflow_id="m-broken"`, "a failed node is not a finished step")
	for _, status := range []string{"pending", "running", "waiting"} {
		require.Contains(t, out, fmt.Sprintf(`workflow_active_executions{action="execute",domain="workflow",status=%q,tenant_id=%q} 0`, status, tenant),
			"no run is live any more: each status shows 0")
	}
	require.Contains(t, out, `baton_lane_running{lane="main"} 0`)
	require.Contains(t, out, "baton_outbound_pending 0")
	require.NotContains(t, out, good.ExecutionID)
}

// A timer waiting for its time is not queued work: workflow_queue_depth
// counts only the jobs that are due, whether River holds the timer as
// scheduled or, a few seconds ahead of its time, as available.
func TestQueueDepthLeavesFutureTimersOut(t *testing.T) {
	t.Parallel()
	p := newProcess(t, pgtest.NewDatabase(t), processOpts{})
	tenant := fmt.Sprintf("metrics-%d", tenantSeq.Add(1))
	p.define(t, tenant, `{"workflow_id":"m-wait","name":"M","version":"1.0.0","nodes":[
	 {"id":"start","type":"start","next":"wait"},
	 {"id":"wait","type":"action","actionType":"wait_for_event","parameters":{"event_id":"ev","timeout":"1h"},"next":"end"},
	 {"id":"end","type":"end"}]}`)
	x := p.start(t, engine.StartParams{TenantID: tenant, WorkflowID: "m-wait"})
	step(t, p, x.ID, 1) // start, then the wait: its timer is due in an hour
	var timers, steps int
	require.NoError(t, p.pool.QueryRow(context.Background(), `
		SELECT count(*) FILTER (WHERE kind = 'execution.wait_timeout' AND scheduled_at > now() + interval '50 minutes'),
		       count(*) FILTER (WHERE kind = 'execution.step')
		FROM river_job`).Scan(&timers, &steps))
	require.Equal(t, 1, timers)
	// The step jobs are due, and never completed: the test runs steps
	// directly.
	want := fmt.Sprintf(`workflow_queue_depth{action="queue",domain="workflow",queue="high"} %d`, steps)
	require.Contains(t, scrape(t, p), want, "as inserted")
	_, err := p.pool.Exec(context.Background(), `UPDATE river_job SET state = 'available' WHERE kind = 'execution.wait_timeout'`)
	require.NoError(t, err)
	require.Contains(t, scrape(t, p), want, "made available ahead of its time")
	require.Contains(t, scrape(t, p), fmt.Sprintf(`workflow_active_executions{action="execute",domain="workflow",status="waiting",tenant_id=%q} 1`, tenant))
}

// step runs an execution's current step as attempt attempt of its job.
func step(t *testing.T, p *process, executionID int64, attempt int) {
	t.Helper()
	var seq int64
	require.NoError(t, p.pool.QueryRow(context.Background(), `SELECT step_seq FROM agent_execution WHERE id = $1`, executionID).Scan(&seq))
	require.NoError(t, p.engine.RunStepAttempt(context.Background(), executionID, seq, attempt, func(context.Context, pgx.Tx) error { return nil }))
}

func scrape(t *testing.T, p *process) string {
	t.Helper()
	resp, err := http.Get(p.server.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain"), resp.Header.Get("Content-Type"))
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// workflowLines keeps the workflow_ lines of a scrape, for failure messages.
func workflowLines(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "workflow_") && !strings.Contains(l, "_bucket") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// With a metrics token, /metrics answers 401 (the error envelope) to a
// scrape without it or with another token, and 200 with it.
func TestMetricsNeedTheirToken(t *testing.T) {
	t.Parallel()
	b := setupAuth(t, func(c *httpapi.Config) {
		c.Metrics = metrics.New(metrics.Config{Pool: c.Pool}).Handler()
		c.MetricsToken = "scrape-0123456789"
	})
	get := func(auth string) (int, http.Header, string) {
		req, err := http.NewRequest(http.MethodGet, b.server.URL+"/metrics", nil)
		require.NoError(t, err)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		b.validator.Check(t, req, resp.StatusCode, resp.Header, body)
		return resp.StatusCode, resp.Header, string(body)
	}
	for _, auth := range []string{"", "Bearer scrape-012345678", "Bearer scrape-0123456789x", "scrape-0123456789", "Bearer " + b.token} {
		status, header, body := get(auth)
		require.Equal(t, http.StatusUnauthorized, status, "%q: %s", auth, body)
		require.Equal(t, `Bearer realm="metrics"`, header.Get("WWW-Authenticate"))
		require.Contains(t, body, `"code":"workflow.access.unauthorized"`)
		require.NotContains(t, body, "workflow_")
	}
	status, _, body := get("Bearer scrape-0123456789")
	require.Equal(t, http.StatusOK, status, "%s", body)
	require.Contains(t, body, "baton_lane_limit")
}
