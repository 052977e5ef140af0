package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
)

// scrapeMetrics GETs /metrics with the Authorization header auth (none when
// empty) and returns the status and body.
func (s *server) scrapeMetrics(t *testing.T, auth string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+s.addr+"/metrics", nil)
	require.NoError(t, err)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// metricsLineBound is the most lines the workflow metrics may add to a
// scrape with the default cap of 100 label values: workflow_execute_duration_ms
// 101 series and workflow_step_duration_ms 201 series of 21 lines each
// (18 buckets, +Inf, sum, count), workflow_retry_count 201 and
// workflow_error_count 101 lines.
const metricsLineBound = 101*21 + 201*21 + 201 + 101

// Without a cap, a scrape went from 957 lines to 200,520 after one
// 9,500-node run labelled with every node id. With the cap it stays within a
// fixed bound however many workflows and nodes run, tenant lanes do not
// show, and with BATON_METRICS_TOKEN set a scrape without the token is
// answered 401.
func TestMetricsStayBoundedAndNeedTheirToken(t *testing.T) {
	t.Parallel()
	const token = "metrics-token-for-the-test"
	env, _, count := serveDatabase(t, `{limits: {nodes: 10000, lanesPerTenant: 200}, lanes: {subagent: 8, batch: 3}}`)
	srv := startServer(t, append(env, "BATON_METRICS_TOKEN="+token))

	for _, auth := range []string{"", "Bearer wrong", token, "Basic " + token} {
		status, body := srv.scrapeMetrics(t, auth)
		require.Equal(t, http.StatusUnauthorized, status, "%q: %s", auth, body)
		require.Contains(t, body, "workflow.access.unauthorized")
	}
	status, body := srv.scrapeMetrics(t, "Bearer "+token)
	require.Equal(t, http.StatusOK, status)
	before := strings.Count(body, "\n")

	status, raw := srv.postAs(t, "metrics", "/api/v1/workflow/definitions", chain(9500))
	require.Equal(t, http.StatusCreated, status, "%s", raw)
	began := time.Now()
	x, _ := srv.run(t, "metrics", "long", map[string]any{})
	require.Equal(t, "completed", x["status"], "%v", x)
	status, body = srv.scrapeMetrics(t, "Bearer "+token)
	require.Equal(t, http.StatusOK, status)
	t.Logf("9,500-node run took %s; /metrics: %d lines before it, %d lines (%d bytes) after it",
		time.Since(began).Round(time.Millisecond), before, strings.Count(body, "\n"), len(body))
	require.Less(t, strings.Count(body, "\n"), before+metricsLineBound)

	// 150 more workflows, each in a lane of its own name; the first in the
	// operator's lane batch.
	for i := range 150 {
		status, raw := srv.postAs(t, "metrics", "/api/v1/workflow/definitions", map[string]any{
			"workflow_id": fmt.Sprintf("wf-%03d", i), "version": "1", "lane": laneOf(i), "nodes": []any{
				map[string]any{"id": "start", "type": "start", "next": fmt.Sprintf("only-%03d", i)},
				map[string]any{"id": fmt.Sprintf("only-%03d", i), "type": "action", "actionType": "set_variables",
					"parameters": map[string]any{"values": map[string]any{"i": i}}, "next": "end"},
				map[string]any{"id": "end", "type": "end"},
			}})
		require.Equal(t, http.StatusCreated, status, "%s", raw)
		status, raw = srv.postAs(t, "metrics", "/api/v1/workflow/execute", map[string]any{"workflow_id": fmt.Sprintf("wf-%03d", i)})
		require.Equal(t, http.StatusAccepted, status, "%s", raw)
	}
	require.Eventually(t, func() bool {
		return count(`SELECT count(*) FROM agent_execution WHERE tenant_id = 'metrics' AND status = 'completed'`) == 151
	}, 60*time.Second, 100*time.Millisecond)

	status, body = srv.scrapeMetrics(t, "Bearer "+token)
	require.Equal(t, http.StatusOK, status)
	after := strings.Count(body, "\n")
	t.Logf("/metrics: %d lines (%d bytes) after 150 more workflows; bound %d", after, len(body), before+metricsLineBound)
	require.Less(t, after, before+metricsLineBound)
	// The body is not printed on failure: it is thousands of lines.
	for _, line := range []string{
		`workflow_step_duration_ms_count{action="step",domain="workflow",step_id="other",workflow_id="long"}`,
		`workflow_step_duration_ms_count{action="step",domain="workflow",step_id="other",workflow_id="other"}`,
		`workflow_execute_duration_ms_count{action="execute",domain="workflow",workflow_id="other"}`,
		`baton_lane_limit{lane="main"} 4`,
	} {
		require.True(t, strings.Contains(body, line), "missing %s", line)
	}
	// Past the caps: a late node, a late workflow; tenants' lanes and
	// lanes that are not built in never label a metric.
	for _, label := range []string{`step_id="n9499"`, `workflow_id="wf-149"`, `lane="tenant-lane-`, `lane="batch"`} {
		require.False(t, strings.Contains(body, label), "unexpected %s", label)
	}
}

// laneOf is the lane of TestMetricsStayBoundedAndNeedTheirToken's
// workflow i.
func laneOf(i int) string {
	if i == 0 {
		return "batch"
	}
	return fmt.Sprintf("tenant-lane-%03d", i)
}

func TestServeRefusesAShortJWTSecret(t *testing.T) {
	t.Parallel()
	out, err := command(t, []string{"DATABASE_URL=" + emptyDatabase(t), "BATON_JWT_SECRET=" + strings.Repeat("s", 31)}, "serve").CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "BATON_JWT_SECRET is 31 bytes: it must be at least 32")

	// baton token only warns.
	out, err = command(t, []string{"BATON_JWT_SECRET=s3cret"}, "token", "--tenant", "acme", "--ttl", "8760h").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "warning: BATON_JWT_SECRET is 6 bytes")
	require.Contains(t, string(out), "warning: --ttl 8760h0m0s is over the 720h0m0s")
}

// The server's timeouts: a body sent a byte at a time is cut at
// http.readTimeout, an idle keep-alive connection is closed at
// http.idleTimeout, and a WebSocket stream outlives both and the write
// timeout.
func TestHTTPTimeouts(t *testing.T) {
	t.Parallel()
	env, _, _ := serveDatabase(t, `{http: {readTimeout: "1s", writeTimeout: "1500ms", idleTimeout: "1s"}, limits: {waitTimeoutMs: 1000}}`)
	srv := startServer(t, env)

	// A slow body: 1,000 bytes announced, one sent every 100 ms.
	conn, err := net.Dial("tcp", srv.addr)
	require.NoError(t, err)
	defer conn.Close()
	began := time.Now()
	_, err = fmt.Fprintf(conn, "POST /api/v1/workflow/definitions HTTP/1.1\r\nHost: baton\r\nX-Tenant-ID: slow\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
	require.NoError(t, err)
	closed := make(chan struct{})
	var answer bytes.Buffer
	go func() {
		defer close(closed)
		_, _ = io.Copy(&answer, conn) // until the server closes it
	}()
	sent := 1
send:
	for time.Since(began) < 6*time.Second {
		select {
		case <-closed:
			break send
		case <-time.After(100 * time.Millisecond):
			if _, err := conn.Write([]byte(" ")); err != nil {
				break send
			}
			sent++
		}
	}
	select {
	case <-closed:
	case <-time.After(time.Second):
		t.Fatalf("the connection is still open after %s and %d bytes", time.Since(began).Round(time.Millisecond), sent)
	}
	cut := time.Since(began)
	t.Logf("slow body cut after %s, %d of 1000 bytes sent", cut.Round(time.Millisecond), sent)
	require.Less(t, cut, 4*time.Second)
	require.Less(t, sent, 100)
	// It is answered 408 in the error envelope before the close, never 200.
	cutResp, err := http.ReadResponse(bufio.NewReader(&answer), nil)
	require.NoError(t, err, "%q", answer.String())
	var cutBody map[string]any
	require.NoError(t, json.NewDecoder(cutResp.Body).Decode(&cutBody))
	require.Equal(t, http.StatusRequestTimeout, cutResp.StatusCode, "%v", cutBody)
	require.Equal(t, "request.body.timeout", cutBody["error"].(map[string]any)["code"])
	require.Equal(t, "nosniff", cutResp.Header.Get("X-Content-Type-Options"))

	// An idle keep-alive connection is closed.
	conn2, err := net.Dial("tcp", srv.addr)
	require.NoError(t, err)
	defer conn2.Close()
	_, err = fmt.Fprintf(conn2, "GET /healthz HTTP/1.1\r\nHost: baton\r\n\r\n")
	require.NoError(t, err)
	r := bufio.NewReader(conn2)
	resp, err := http.ReadResponse(r, nil)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	idle := time.Now()
	require.NoError(t, conn2.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = r.ReadByte()
	require.ErrorIs(t, err, io.EOF, "the server closes the idle connection")
	t.Logf("idle connection closed after %s", time.Since(idle).Round(time.Millisecond))
	require.Less(t, time.Since(idle), 4*time.Second)

	// A stream held for over three times the timeouts still delivers.
	srv.define(t, `{"workflow_id": "ping", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "end"}, {"id": "end", "type": "end"}]}`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws://"+srv.addr+"/api/v1/ws?workflow_id=ping",
		&websocket.DialOptions{HTTPHeader: http.Header{"X-Tenant-Id": []string{"crash"}}})
	require.NoError(t, err)
	defer func() { _ = ws.CloseNow() }()
	time.Sleep(5 * time.Second)
	status, raw := srv.post(t, "/api/v1/workflow/execute", map[string]any{"workflow_id": "ping"})
	require.Equal(t, http.StatusAccepted, status, "%s", raw)
	_, msg, err := ws.Read(ctx)
	require.NoError(t, err, "the stream outlives the read and write timeouts")
	var ev map[string]any
	require.NoError(t, json.Unmarshal(msg, &ev))
	require.Equal(t, "ping", ev["metadata"].(map[string]any)["workflow_id"], "%s", msg)
}

// get GETs an API path as the tenant and returns the status and the decoded
// body.
func (s *server) get(t *testing.T, tenant, path string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+s.addr+path, nil)
	require.NoError(t, err)
	req.Header.Set("X-Tenant-ID", tenant)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var body map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	return resp.StatusCode, body
}

// generatedID matches the ids Baton makes (prefix, dash, 24 hex digits).
var generatedID = regexp.MustCompile(`[a-z]+-[0-9a-f]{24}`)

// At info level the log carries no message text or contact, and no long id
// whole; a tool's error reaches the tenant without the tool's address,
// which stays in the server log.
func TestLogsAndToolErrorsKeepPrivateThingsPrivate(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	toolURL := "http://" + ln.Addr().String() + "/internal/process"
	require.NoError(t, ln.Close()) // nothing listens: connection refused
	env, _, _ := serveDatabase(t, fmt.Sprintf(`{limits: {idBytes: 1000},
	  tools: {internal: {type: "http", url: %q, retry: {max: 1, delay: "10ms"}}}}`, toolURL))
	srv := startServer(t, env)
	const (
		contact = "+5215550001234"
		secret  = "tu código es 4321"
	)
	threadID := strings.Repeat("t", 900)

	srv.define(t, `{"workflow_id": "greet", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "say"},
	  {"id": "say", "type": "action", "actionType": "send_message", "parameters": {"message": "Hola {{name}}, `+secret+`"}, "next": "end"},
	  {"id": "end", "type": "end"}]}`)
	srv.define(t, `{"workflow_id": "call", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "fetch"},
	  {"id": "fetch", "type": "task", "task": "internal", "next": "end"},
	  {"id": "end", "type": "end"}]}`)
	status, raw := srv.post(t, "/api/v1/threads", map[string]any{"channel": "whatsapp", "contact": contact, "thread_id": threadID})
	require.Equal(t, http.StatusCreated, status, "%s", raw)
	x, _ := srv.run(t, "crash", "greet", map[string]any{"name": "Juan"})
	require.Equal(t, "completed", x["status"], "%v", x)
	status, raw = srv.post(t, "/api/v1/workflow/execute", map[string]any{"workflow_id": "greet", "thread_id": threadID, "input": map[string]any{"name": "Juan"}})
	require.Equal(t, http.StatusAccepted, status, "%s", raw)
	x, took := srv.run(t, "crash", "call", map[string]any{})
	t.Logf("the failing run took %s", took)
	require.Equal(t, "failed", x["status"], "%v", x)
	executionID := x["execution_id"].(string)

	// The tenant's view of the tool's failure.
	status, body := srv.get(t, "crash", "/api/v1/workflow/executions/"+executionID)
	require.Equal(t, http.StatusOK, status)
	status, logs := srv.get(t, "crash", "/api/v1/workflow/executions/"+executionID+"/logs")
	require.Equal(t, http.StatusOK, status)
	seen, err := json.Marshal([]any{body, logs})
	require.NoError(t, err)
	require.Contains(t, string(seen), "connection refused")
	require.Contains(t, string(seen), "workflow.step_retry", "the retry's event is there too")
	for _, private := range []string{ln.Addr().String(), "127.0.0.1", "/internal/process", "http://"} {
		require.NotContains(t, string(seen), private, "the tenant sees %s", private)
	}

	var delivered map[string]any
	require.Eventually(t, func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		for _, l := range srv.logs {
			if l["msg"] == "message delivered" && l["thread_id"] != "" && strings.HasPrefix(fmt.Sprint(l["thread_id"]), "ttt") {
				delivered = l
				return true
			}
		}
		return false
	}, 20*time.Second, 50*time.Millisecond)
	require.Equal(t, strings.Repeat("t", 200)+"…[700 bytes cut]", delivered["thread_id"], "a long id is cut")

	srv.mu.Lock()
	defer srv.mu.Unlock()
	fullError := false
	for _, l := range srv.logs {
		line, err := json.Marshal(l)
		require.NoError(t, err)
		if l["level"] == "INFO" {
			// The time and generated ids are random digits and hex, so the
			// check reads the line without them: "4321" once matched a
			// timestamp.
			rest := maps.Clone(l)
			delete(rest, "time")
			text, err := json.Marshal(rest)
			require.NoError(t, err)
			text = generatedID.ReplaceAll(text, nil)
			require.NotContains(t, string(text), "5550001234", "an info line carries the contact")
			require.NotContains(t, string(text), "4321", "an info line carries the message text")
			require.NotContains(t, string(text), "código", "an info line carries the message text")
		}
		require.NotContains(t, string(line), strings.Repeat("t", 201), "a line carries a long id whole")
		if l["msg"] == "step failed" && strings.Contains(string(line), toolURL) {
			fullError = true
		}
	}
	require.True(t, fullError, "the server log has the tool's URL")
}

// Every answer of baton serve carries X-Content-Type-Options: nosniff: the
// API's, its errors, the probes, the OpenAPI document, /metrics, and the
// console's static files, redirects and pages, River UI included.
func TestServeAnswersAreNoSniff(t *testing.T) {
	t.Parallel()
	env, _, _ := serveDatabase(t, `{}`)
	srv := startServer(t, env)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for path, status := range map[string]int{
		"/healthz": http.StatusOK, "/readyz": http.StatusOK, "/api/v1/openapi.yaml": http.StatusOK, "/metrics": http.StatusOK,
		"/api/v1/workflow/definitions": http.StatusOK, "/api/v1/workflow/executions/nope": http.StatusNotFound, "/nowhere": http.StatusNotFound,
		"/console/static/console.css": http.StatusOK, "/console": http.StatusFound, "/console/signin": http.StatusOK,
		"/console/jobs/": http.StatusOK, "/console/nowhere": http.StatusNotFound,
	} {
		req, err := http.NewRequest(http.MethodGet, "http://"+srv.addr+path, nil)
		require.NoError(t, err)
		if strings.HasPrefix(path, "/api/") {
			req.Header.Set("X-Tenant-ID", "sniff")
		}
		resp, err := noRedirect.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, status, resp.StatusCode, path)
		require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), path)
	}
}
