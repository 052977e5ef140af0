package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/pgcluster"
)

// outageClients is how many clients send requests through the restart.
const outageClients = 4

// outageFlow runs in its start transaction: a message, then the end.
const outageFlow = `{"workflow_id": "ping", "version": "1", "nodes": [
  {"id": "start", "type": "start", "next": "say"},
  {"id": "say", "type": "action", "actionType": "send_message", "parameters": {"message": "pong {{n}}"}, "next": "end"},
  {"id": "end", "type": "end", "result": {"summary": "ok"}}]}`

// outageAnswer is one request's answer, or the transport error that kept
// it from having one.
type outageAnswer struct {
	kind          string
	began, ended  time.Time
	status        int
	body          []byte
	retryAfter    string
	transportErr  error
	code          string
	retryable     bool
	retryAfterMS  *float64
	executionID   string
	decodeProblem error
}

// While PostgreSQL restarts, every API error is a 503 retryable envelope
// with Retry-After: clients send executions, inbound messages and reads to
// `baton serve` without pause while its server is stopped at once (pg_ctl
// stop -m immediate, as a crash would) and started again on the same port,
// and every answer is checked. The server keeps running through the
// restart, and requests of every kind succeed again after it.
func TestOutageRestartAnswers503(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cluster, dataDir := outageCluster(t)
	dbURL := outageDatabase(t, cluster)
	out, err := command(t, []string{"DATABASE_URL=" + dbURL}, "migrate").CombinedOutput()
	require.NoError(t, err, "%s", out)
	srv := startServer(t, []string{"DATABASE_URL=" + cappedPool(t, dbURL)})
	srv.define(t, outageFlow)
	for c := range outageClients {
		status, body := srv.post(t, "/api/v1/threads", map[string]any{
			"thread_id": outageThread(c), "channel": "sms", "contact": fmt.Sprintf("+52155500%02d", c), "default_workflow_id": "ping"})
		require.Equal(t, http.StatusCreated, status, "%s", body)
	}

	load := &outageLoad{srv: srv, stop: make(chan struct{})}
	var wg sync.WaitGroup
	for c := range outageClients {
		wg.Go(func() { load.client(c) })
	}
	stopLoad := sync.OnceFunc(func() { close(load.stop); wg.Wait() })
	t.Cleanup(stopLoad)

	time.Sleep(2 * time.Second)
	down := time.Now()
	require.NoError(t, cluster.StopImmediate(ctx))
	stopped := time.Now()
	time.Sleep(time.Second)
	_, err = pgcluster.Start(ctx, pgcluster.Options{Dir: dataDir, Port: cluster.Port(), Fast: true, Share: true})
	require.NoError(t, err)
	up := time.Now()

	// Requests of every kind succeed again; then a little more load.
	kinds := []string{"execute", "inbound", "status", "definitions"}
	require.Eventually(t, func() bool {
		for _, k := range kinds {
			if !load.succeededSince(k, up) {
				return false
			}
		}
		return true
	}, 20*time.Second, 50*time.Millisecond, "requests of every kind succeed after the restart")
	// River works jobs again: a message of an execution started after the
	// restart is delivered.
	require.Eventually(t, func() bool {
		delivered := srv.deliveredExecutions()
		for _, id := range load.executionsSince(up) {
			if delivered[id] {
				return true
			}
		}
		return false
	}, 20*time.Second, 50*time.Millisecond, "jobs are worked after the restart")
	time.Sleep(time.Second)
	stopLoad()

	select {
	case <-srv.done:
		t.Fatal("baton serve exited during the restart")
	default:
	}

	answers := load.all()
	var ok, unavailable, spanning int
	var first503, last503 time.Time
	for _, a := range answers {
		require.NoError(t, a.transportErr, "%s at %s: baton serve must answer", a.kind, a.began.Format(time.RFC3339Nano))
		if a.status >= 200 && a.status < 300 {
			ok++
		} else {
			require.Equal(t, http.StatusServiceUnavailable, a.status, "%s: %s", a.kind, a.body)
			require.NoError(t, a.decodeProblem, "%s: %s", a.kind, a.body)
			require.Equal(t, "workflow.service.unavailable", a.code, "%s: %s", a.kind, a.body)
			require.True(t, a.retryable, "%s: %s", a.kind, a.body)
			require.NotNil(t, a.retryAfterMS, "%s: %s", a.kind, a.body)
			require.Positive(t, *a.retryAfterMS, "%s: %s", a.kind, a.body)
			require.Equal(t, "1", a.retryAfter, "%s: Retry-After", a.kind)
			unavailable++
			if first503.IsZero() {
				first503 = a.ended
			}
			last503 = a.ended
		}
		if a.began.Before(up) && a.ended.After(down) {
			spanning++
		}
	}
	t.Logf("%d answers: %d 2xx, %d 503; %d requests spanned the outage; the server was down %s (stop %s, start %s); 503s from %s to %s after the stop",
		len(answers), ok, unavailable, spanning, up.Sub(down).Round(time.Millisecond), stopped.Sub(down).Round(time.Millisecond),
		up.Sub(stopped).Round(time.Millisecond), sinceOrZero(first503, down), sinceOrZero(last503, down))
	t.Logf("server warnings and errors: %v", srv.levels())
	require.Positive(t, unavailable+spanning, "no request met the outage")
	require.Positive(t, ok)
}

func sinceOrZero(t, since time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	return t.Sub(since).Round(time.Millisecond)
}

func outageThread(c int) string { return fmt.Sprintf("outage-%d", c) }

// outageCluster starts a private PostgreSQL cluster the test may restart,
// and returns it and its data directory; it is stopped and removed when
// the test ends.
func outageCluster(t *testing.T) (*pgcluster.Cluster, string) {
	t.Helper()
	tmp, err := os.MkdirTemp("", "baton-outage-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(tmp) })
	// The postgres OS user, which runs the cluster when we are root, must
	// reach the data directory.
	require.NoError(t, os.Chmod(tmp, 0o755))
	dataDir := filepath.Join(tmp, "data")
	cluster, err := pgcluster.Start(context.Background(), pgcluster.Options{Dir: dataDir, Fast: true})
	if errors.Is(err, pgcluster.ErrNoBinaries) {
		t.Skipf("no PostgreSQL binaries to start a cluster of the test's own: %v", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// The owner stops whatever runs in the directory now, restarted by
		// a guest or not.
		_ = cluster.Stop(ctx)
	})
	return cluster, dataDir
}

// outageDatabase creates a database on the cluster and returns its URL.
func outageDatabase(t *testing.T, cluster *pgcluster.Cluster) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, cluster.URL())
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE DATABASE baton_outage")
	require.NoError(t, err)
	u, err := url.Parse(cluster.URL())
	require.NoError(t, err)
	u.Path = "/baton_outage"
	return u.String()
}

// outageLoad sends requests from a few clients until stop is closed and
// keeps every answer.
type outageLoad struct {
	srv  *server
	stop chan struct{}

	mu      sync.Mutex
	answers []outageAnswer
}

// client sends, in turn, an execution, an inbound message on its thread,
// a read of its last execution and a list of definitions.
func (l *outageLoad) client(c int) {
	hc := &http.Client{Timeout: 30 * time.Second}
	lastExecution := ""
	for i := 0; ; i++ {
		select {
		case <-l.stop:
			return
		default:
		}
		var a outageAnswer
		switch i % 4 {
		case 0:
			a = l.send(hc, "execute", http.MethodPost, "/api/v1/workflow/execute", map[string]any{
				"message_id": fmt.Sprintf("exec-%d-%d", c, i),
				"payload":    map[string]any{"workflow_id": "ping", "input": map[string]any{"n": i}},
			})
			if a.executionID != "" {
				lastExecution = a.executionID
			}
		case 1:
			a = l.send(hc, "inbound", http.MethodPost, "/api/v1/threads/"+outageThread(c)+"/messages", map[string]any{
				"payload": map[string]any{"text": fmt.Sprintf("hola %d", i), "message_id": fmt.Sprintf("in-%d-%d", c, i)},
			})
		case 2:
			if lastExecution == "" {
				continue
			}
			a = l.send(hc, "status", http.MethodGet, "/api/v1/workflow/executions/"+lastExecution, nil)
		case 3:
			a = l.send(hc, "definitions", http.MethodGet, "/api/v1/workflow/definitions", nil)
		}
		l.mu.Lock()
		l.answers = append(l.answers, a)
		l.mu.Unlock()
	}
}

// send makes one request and reads its answer.
func (l *outageLoad) send(hc *http.Client, kind, method, path string, body any) (a outageAnswer) {
	a = outageAnswer{kind: kind, began: time.Now()}
	defer func() { a.ended = time.Now() }()
	var reader io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			a.transportErr = err
			return a
		}
		reader = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, "http://"+l.srv.addr+path, reader)
	if err != nil {
		a.transportErr = err
		return a
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Tenant-ID", "crash")
	resp, err := hc.Do(req)
	if err != nil {
		a.transportErr = err
		return a
	}
	defer resp.Body.Close()
	a.body, a.transportErr = io.ReadAll(resp.Body)
	a.status, a.retryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
	var env struct {
		Data struct {
			ExecutionID string `json:"execution_id"`
		} `json:"data"`
		Error *struct {
			Code         string   `json:"code"`
			Retryable    bool     `json:"retryable"`
			RetryAfterMS *float64 `json:"retry_after_ms"`
		} `json:"error"`
	}
	if err := json.Unmarshal(a.body, &env); err != nil {
		a.decodeProblem = err
		return a
	}
	a.executionID = env.Data.ExecutionID
	if env.Error != nil {
		a.code, a.retryable, a.retryAfterMS = env.Error.Code, env.Error.Retryable, env.Error.RetryAfterMS
	} else if a.status >= 300 {
		a.decodeProblem = errors.New("an error answer without an error object")
	}
	return a
}

// succeededSince reports whether a request of kind sent after since
// succeeded.
func (l *outageLoad) succeededSince(kind string, since time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range l.answers {
		if a.kind == kind && a.began.After(since) && a.status >= 200 && a.status < 300 {
			return true
		}
	}
	return false
}

// executionsSince returns the executions started by requests sent after
// since.
func (l *outageLoad) executionsSince(since time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ids []string
	for _, a := range l.answers {
		if a.kind == "execute" && a.began.After(since) && a.executionID != "" {
			ids = append(ids, a.executionID)
		}
	}
	return ids
}

// deliveredExecutions returns the executions whose messages the log
// channel logged.
func (s *server) deliveredExecutions() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]bool{}
	for _, l := range s.logs {
		if id, ok := l["execution_id"].(string); ok && l["msg"] == "message delivered" {
			out[id] = true
		}
	}
	return out
}

// levels counts the server's log lines by level and message.
func (s *server) levels() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for _, l := range s.logs {
		if lv, _ := l["level"].(string); lv == "WARN" || lv == "ERROR" {
			out[lv+" "+fmt.Sprint(l["msg"])]++
		}
	}
	return out
}

// all returns every answer so far.
func (l *outageLoad) all() []outageAnswer {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]outageAnswer(nil), l.answers...)
}
