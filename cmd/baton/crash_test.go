package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/pgtest"
)

// server is a running `baton serve` child process.
type server struct {
	cmd  *exec.Cmd
	addr string
	mu   sync.Mutex
	logs []map[string]any
	done chan struct{}
}

// startServer runs `baton serve` on a free port and returns once it listens.
// Its JSON log lines are kept for the test to read.
func startServer(t *testing.T, env []string, args ...string) *server {
	t.Helper()
	cmd := command(t, env, append([]string{"serve", "--insecure-no-auth", "--addr", "127.0.0.1:0", "--log-format", "json"}, args...)...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	cmd.Stdout = io.Discard
	require.NoError(t, cmd.Start())
	s := &server{cmd: cmd, done: make(chan struct{})}
	ready := make(chan string, 1)
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			s.mu.Lock()
			s.logs = append(s.logs, line)
			s.mu.Unlock()
			if line["msg"] == "baton serving" {
				ready <- line["addr"].(string)
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	select {
	case s.addr = <-ready:
	case <-s.done:
		t.Fatal("baton serve exited before listening")
	case <-time.After(60 * time.Second):
		t.Fatal("baton serve did not listen within 60s")
	}
	return s
}

// kill SIGKILLs the process and waits until its output is read.
func (s *server) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, s.cmd.Process.Kill())
	_ = s.cmd.Wait()
	<-s.done
}

// deliveredIDs returns how often the log channel logged each message id.
func (s *server) deliveredIDs() map[int64]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int64]int{}
	for _, l := range s.logs {
		if l["msg"] == "message delivered" {
			out[int64(l["message_id"].(float64))]++
		}
	}
	return out
}

// serveDatabase creates a database for `baton serve` children and a
// configuration file holding config. It returns the children's environment,
// a pool on the database and count, which runs a query selecting one
// integer.
func serveDatabase(t *testing.T, config string) (env []string, pool *pgxpool.Pool, count func(sql string, args ...any) int) {
	t.Helper()
	return serveDatabaseAt(t, pgtest.NewDatabase(t), config)
}

// serveDatabaseAt is serveDatabase on the existing database at url.
func serveDatabaseAt(t *testing.T, url, config string) (env []string, pool *pgxpool.Pool, count func(sql string, args ...any) int) {
	t.Helper()
	cfgPath := filepath.Join(t.TempDir(), "baton.json5")
	require.NoError(t, os.WriteFile(cfgPath, []byte(config), 0o600))
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	count = func(sql string, args ...any) int {
		var n int
		require.NoError(t, pool.QueryRow(context.Background(), sql, args...).Scan(&n))
		return n
	}
	return []string{"DATABASE_URL=" + cappedPool(t, url), "BATON_CONFIG=" + cfgPath}, pool, count
}

// define stores a workflow definition (JSON) through the API.
func (s *server) define(t *testing.T, definition string) {
	t.Helper()
	var payload map[string]any
	require.NoError(t, json.Unmarshal([]byte(definition), &payload))
	status, body := s.post(t, "/api/v1/workflow/definitions", payload)
	require.Equal(t, http.StatusCreated, status, "%s", body)
}

// post sends an API request as tenant "crash" and returns the status and body.
func (s *server) post(t *testing.T, path string, payload any) (int, []byte) {
	t.Helper()
	return s.postAs(t, "crash", path, payload)
}

// postAs sends an API request as the tenant and returns the status and body.
func (s *server) postAs(t *testing.T, tenant, path string, payload any) (int, []byte) {
	t.Helper()
	a, err := s.send(context.Background(), tenant, path, map[string]any{"payload": payload})
	require.NoError(t, err)
	return a.status, a.body
}

// answer is an API response, its body read.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// send POSTs an API request envelope as the tenant and returns the answer,
// or the error that kept it from coming. It fails no test, so goroutines
// may call it.
func (s *server) send(ctx context.Context, tenant, path string, envelope map[string]any) (answer, error) {
	raw, err := json.Marshal(envelope)
	if err != nil {
		return answer{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+s.addr+path, bytes.NewReader(raw))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Tenant-ID", tenant)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: body}, nil
}

// crashFlows are the workflows of TestSIGKILLWithWaitingAndMidStepExecutions:
// each sends a message, then waits or calls the slow tool, then sends another.
func crashFlows() []string {
	flow := func(id, middle, after string) string {
		return fmt.Sprintf(`{"workflow_id": %q, "version": "1", "nodes": [
		  {"id": "start", "type": "start", "next": "hi"},
		  {"id": "hi", "type": "action", "actionType": "send_message", "parameters": {"message": "antes {{n}}"}, "next": "mid"},
		  %s,
		  {"id": "bye", "type": "action", "actionType": "send_message", "parameters": {"message": "%s {{n}}"}, "next": "end"},
		  {"id": "end", "type": "end", "result": {"summary": "ok"}}]}`, id, middle, after)
	}
	return []string{
		flow("midstep", `{"id": "mid", "type": "task", "task": "slow", "inputs": {"n": "{{n}}"}, "next": "bye"}`, "despues"),
		flow("waitlong", `{"id": "mid", "type": "action", "actionType": "wait_for_event", "parameters": {"event_id": "ev", "timeout": "1h"}, "next": "bye"}`, "adios"),
		flow("waitshort", `{"id": "mid", "type": "action", "actionType": "wait_for_event", "parameters": {"event_id": "ev", "timeout": "40s", "onTimeout": "continue"}, "next": "bye"}`, "tarde"),
		// chat is a thread's default workflow: inbound messages start it.
		`{"workflow_id": "chat", "version": "1", "nodes": [
		  {"id": "start", "type": "start", "next": "think"},
		  {"id": "think", "type": "task", "task": "slow", "inputs": {"n": "chat {{lastResponse}}"}, "next": "reply"},
		  {"id": "reply", "type": "action", "actionType": "send_message", "parameters": {"message": "re: {{lastResponse}}"}, "next": "end"},
		  {"id": "end", "type": "end", "result": {"summary": "ok"}}]}`,
	}
}

// The server is SIGKILLed while 200 executions wait (150 for an
// event that comes after the restart, 50 whose 40 s timeout passes after it)
// and 20 are mid-step (their tool call in flight). A new server finishes all
// 220: each execution's two messages exist exactly once and were delivered
// exactly once, and each interrupted tool call was made once more.
//
// At the same moment 5 chat sessions each have a run mid-step and
// two inbound messages queued behind it (collect). After the restart every
// queued message is answered, once, by one collected run per session.
//
// The new server's process sweep finds the killed one's presence lock free
// and hands its running steps back about 2.5 s after it starts
// (jobs/presence.go), rather than River's rescuer after --rescue-after.
func TestSIGKILLWithWaitingAndMidStepExecutions(t *testing.T) {
	t.Parallel()
	const (
		midStep   = 20
		waitLong  = 150
		waitShort = 50
		total     = midStep + waitLong + waitShort
		chats     = 5
	)
	var (
		released atomic.Bool
		entered  atomic.Int32
		mu       sync.Mutex
		calls    = map[string]int{} // tool calls per execution after release
	)
	tool := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Inputs map[string]any `json:"inputs"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		n, _ := body.Inputs["n"].(string)
		if !released.Load() {
			entered.Add(1)
			<-r.Context().Done() // in flight until the server dies
			return
		}
		mu.Lock()
		calls[n]++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok": true}`))
	}))
	t.Cleanup(tool.Close)

	env, pool, count := serveDatabase(t, fmt.Sprintf(`{agents: {defaults: {maxConcurrent: 400}}, tools: {slow: {type: "http", url: %q, timeout: "50s", retry: {max: 0}}}}`, tool.URL))

	first := startServer(t, env)
	for _, def := range crashFlows() {
		first.define(t, def)
	}
	kind := func(i int) string {
		switch {
		case i < midStep:
			return "midstep"
		case i < midStep+waitLong:
			return "waitlong"
		default:
			return "waitshort"
		}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range total {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			id := fmt.Sprintf("%s-%03d", kind(i), i)
			status, body := first.post(t, "/api/v1/workflow/execute", map[string]any{
				"workflow_id": kind(i), "execution_id": id, "thread_id": "th-" + id, "input": map[string]any{"n": id}})
			require.Equal(t, http.StatusAccepted, status, "%s", body)
		}()
	}
	wg.Wait()
	chat := func(k int) string { return fmt.Sprintf("chat-%d", k) }
	for k := range chats {
		status, body := first.post(t, "/api/v1/threads", map[string]any{"thread_id": chat(k), "channel": "whatsapp", "contact": chat(k),
			"default_workflow_id": "chat", "queue": map[string]any{"mode": "collect", "debounce_ms": 0}})
		require.Equal(t, http.StatusCreated, status, "%s", body)
		for i, text := range []string{"hola", "uno", "dos"} {
			status, body := first.post(t, "/api/v1/threads/"+chat(k)+"/messages", map[string]any{"text": fmt.Sprintf("%s %d", text, k), "message_id": fmt.Sprintf("%s-%d", chat(k), i)})
			require.Equal(t, http.StatusAccepted, status, "%s", body)
			want := map[bool]string{true: "started", false: "queued"}[i == 0]
			require.Contains(t, string(body), `"outcome":"`+want+`"`)
		}
	}

	// Quiet point: every tool call in flight, every wait entered, every
	// first message delivered.
	require.Eventually(t, func() bool {
		return entered.Load() == midStep+chats &&
			count(`SELECT count(*) FROM agent_execution WHERE status = 'waiting'`) == waitLong+waitShort &&
			count(`SELECT count(*) FROM thread_message WHERE direction = 'out' AND status = 'delivered'`) == total
	}, 60*time.Second, 50*time.Millisecond, "entered %d", entered.Load())
	first.kill(t)
	released.Store(true)

	second := startServer(t, env)
	for i := midStep; i < midStep+waitLong; i++ {
		id := fmt.Sprintf("%s-%03d", kind(i), i)
		status, body := second.post(t, "/api/v1/events", map[string]any{
			"event_type": "EVENT_COMPLETED", "event_id": "e-" + id, "execution_id": id, "data": map[string]any{"event_id": "ev"}})
		require.Equal(t, http.StatusAccepted, status, "%s", body)
	}
	require.Eventually(t, func() bool {
		return count(`SELECT count(*) FROM agent_execution WHERE status = 'completed'`) == total+2*chats &&
			count(`SELECT count(*) FROM thread_message WHERE direction = 'out' AND status = 'delivered'`) == 2*total+2*chats
	}, 150*time.Second, 200*time.Millisecond, "completed %d of %d",
		count(`SELECT count(*) FROM agent_execution WHERE status = 'completed'`), total+2*chats)

	// Each execution ended the way its kind says.
	require.Equal(t, waitShort, count(`SELECT count(*) FROM agent_execution WHERE workflow_id = 'waitshort' AND (variables->>'timedOut')::boolean`))
	require.Equal(t, waitLong, count(`SELECT count(*) FROM agent_execution WHERE workflow_id = 'waitlong' AND NOT (variables->>'timedOut')::boolean`))
	require.Equal(t, total+2*chats, count(`SELECT count(*) FROM execution_event WHERE action = 'workflow.completed'`), "one completion per execution")
	require.Equal(t, 3*chats, count(`SELECT count(*) FROM thread_message WHERE direction = 'in' AND status = 'consumed'`), "every inbound message answered")
	require.Equal(t, 3*chats, count(`SELECT count(*) FROM thread_message WHERE direction = 'in'`))

	// Every outbound message exists exactly once, with the expected text.
	rows, err := pool.Query(context.Background(), `
		SELECT x.execution_id, m.body, m.id FROM thread_message m JOIN agent_execution x ON x.id = m.execution_id
		WHERE m.direction = 'out' ORDER BY x.execution_id, m.id`)
	require.NoError(t, err)
	bodies := map[string][]string{}
	ids := map[int64]bool{}
	for rows.Next() {
		var x, body string
		var id int64
		require.NoError(t, rows.Scan(&x, &body, &id))
		bodies[x] = append(bodies[x], body)
		ids[id] = true
	}
	require.NoError(t, rows.Err())
	require.Len(t, bodies, total+2*chats)
	after := map[string]string{"midstep": "despues", "waitlong": "adios", "waitshort": "tarde"}
	for i := range total {
		id := fmt.Sprintf("%s-%03d", kind(i), i)
		require.Equal(t, []string{"antes " + id, after[kind(i)] + " " + id}, bodies[id])
	}
	// Each chat thread: the interrupted run's answer, then one collected
	// run's answer to both queued messages, in that order.
	for k := range chats {
		rows, err := pool.Query(context.Background(), `
			SELECT m.body FROM thread_message m JOIN thread th ON th.id = m.thread_id
			WHERE th.thread_id = $1 AND m.direction = 'out' ORDER BY m.delivery_seq, m.id`, chat(k))
		require.NoError(t, err)
		var got []string
		for rows.Next() {
			var body string
			require.NoError(t, rows.Scan(&body))
			got = append(got, body)
		}
		require.NoError(t, rows.Err())
		require.Equal(t, []string{
			fmt.Sprintf("re: hola %d", k),
			fmt.Sprintf("re: [Queued messages while agent was busy]\n\n---\nQueued #1\nuno %d\n\n---\nQueued #2\ndos %d", k, k),
		}, got)
	}

	// Every message was delivered exactly once across both processes: the
	// first had delivered all it had before it died.
	delivered := first.deliveredIDs()
	for id, n := range second.deliveredIDs() {
		delivered[id] += n
	}
	require.Len(t, delivered, 2*total+2*chats)
	for id, n := range delivered {
		require.True(t, ids[id], "delivered message %d is not in the outbox", id)
		require.Equal(t, 1, n, "message %d delivered %d times", id, n)
	}

	// Each interrupted tool call was made again exactly once.
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, calls, midStep+2*chats)
	for n, c := range calls {
		require.Equal(t, 1, c, "tool called %d times for %s after the restart", c, n)
		require.True(t, strings.HasPrefix(n, "midstep-") || strings.HasPrefix(n, "chat "), n)
	}
}
