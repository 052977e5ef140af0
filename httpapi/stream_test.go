package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/httpapi"
	"github.com/batonrun/baton/internal/openapitest"
	"github.com/batonrun/baton/internal/pgtest"
	"github.com/batonrun/baton/jobs"
	"github.com/batonrun/baton/live"
	"github.com/batonrun/baton/metrics"
)

// process is one Baton process on a shared database: its own pool, engine,
// River client, event hub and HTTP server.
type process struct {
	pool    *pgxpool.Pool
	engine  *engine.Engine
	metrics *metrics.Metrics
	server  *httptest.Server
}

type processOpts struct {
	// work makes the River client work jobs; otherwise it only inserts.
	work bool
	// buffer is the hub's SubscriberBuffer (0: default).
	buffer int
	// writeTimeout is the server's StreamWriteTimeout (0: default).
	writeTimeout time.Duration
	// smallSockets shrinks the server's socket send buffers so a client
	// that stops reading is noticed after a few kilobytes.
	smallSockets bool
	tools        map[string]engine.ToolFunc
}

func newProcess(t *testing.T, dbURL string, opts processOpts) *process {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	tools := engine.NewTools()
	for name, fn := range opts.tools {
		tools.Register(name, fn)
	}
	reg := metrics.New(metrics.Config{Pool: pool})
	reg.WatchBreakers(tools)
	// A process that does not work its jobs leaves first steps to them too.
	eng, err := engine.New(engine.Config{Pool: pool, Tools: tools, Channel: &engine.MemoryChannel{}, Metrics: reg, DeferFirstStep: !opts.work})
	require.NoError(t, err)
	client, err := jobs.NewClient(pool, jobs.Config{Engine: eng, InsertOnly: !opts.work})
	require.NoError(t, err)
	if opts.work {
		require.NoError(t, client.Start(context.Background()))
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = client.StopAndCancel(ctx)
		})
	}
	hub, err := live.NewHub(live.Config{Pool: pool, SubscriberBuffer: opts.buffer})
	require.NoError(t, err)
	hub.Start()
	t.Cleanup(hub.Stop)
	api, err := httpapi.New(httpapi.Config{Engine: eng, Pool: pool, JWTSecret: secret, Hub: hub, Metrics: reg.Handler(), StreamWriteTimeout: opts.writeTimeout})
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(api.Handler())
	if opts.smallSockets {
		srv.Listener = &smallBufferListener{Listener: srv.Listener}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return &process{pool: pool, engine: eng, metrics: reg, server: srv}
}

// smallBufferListener gives accepted connections a 4 KiB send buffer.
type smallBufferListener struct{ net.Listener }

func (l *smallBufferListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

func (p *process) define(t *testing.T, tenant, definition string) {
	t.Helper()
	_, _, err := p.engine.DefineWorkflow(context.Background(), p.pool, tenant, []byte(definition))
	require.NoError(t, err)
}

func (p *process) start(t *testing.T, params engine.StartParams) *engine.Execution {
	t.Helper()
	var x *engine.Execution
	require.NoError(t, p.engine.WithTx(context.Background(), func(tx pgx.Tx) error {
		var err error
		x, err = p.engine.StartExecution(context.Background(), tx, params)
		return err
	}))
	return x
}

// dial opens the event stream the way a browser does: the token in the
// query string and no headers. smallReads shrinks the client's receive
// buffer.
func (p *process) dial(t *testing.T, tenant string, query url.Values, smallReads bool) *websocket.Conn {
	t.Helper()
	return dialStream(t, p.server.URL, tenant, query, smallReads)
}

// dialStream opens the event stream of the server at serverURL as dial
// does.
func dialStream(t *testing.T, serverURL, tenant string, query url.Values, smallReads bool) *websocket.Conn {
	t.Helper()
	query.Set("access_token", mint(t, tenant))
	u := "ws" + strings.TrimPrefix(serverURL, "http") + "/api/v1/ws?" + query.Encode()
	opts := &websocket.DialOptions{}
	if smallReads {
		dialer := &net.Dialer{}
		opts.HTTPClient = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetReadBuffer(4096)
			}
			return c, err
		}}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, resp, err := websocket.Dial(ctx, u, opts)
	require.NoError(t, err)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	conn.SetReadLimit(1 << 20)
	t.Cleanup(func() { _ = conn.CloseNow() })
	return conn
}

// wsEvent is a decoded stream message.
type wsEvent struct {
	EventID int64 `json:"event_id"`
	Type    struct {
		Domain string `json:"domain"`
		Action string `json:"action"`
	} `json:"type"`
	TenantID      string `json:"tenant_id"`
	SourceService string `json:"source_service"`
	Metadata      struct {
		WorkflowID  string `json:"workflow_id"`
		ExecutionID string `json:"execution_id"`
		SessionID   string `json:"session_id"`
	} `json:"metadata"`
	Payload map[string]any `json:"payload"`
}

func (e wsEvent) action() string { return e.Type.Domain + "." + e.Type.Action }

// read reads one message, checks it against the OpenAPI document's
// WebSocketEvent schema and decodes it.
func read(t *testing.T, conn *websocket.Conn) (wsEvent, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, raw, err := conn.Read(ctx)
	if err != nil {
		return wsEvent{}, err
	}
	require.NoError(t, openapitest.New(t, httpapi.OpenAPIDocument).ValidateSchema("WebSocketEvent", raw))
	var ev wsEvent
	require.NoError(t, json.Unmarshal(raw, &ev))
	return ev, nil
}

// readUntil reads until done says the stream has what the test needs.
func readUntil(t *testing.T, conn *websocket.Conn, done func([]wsEvent) bool) []wsEvent {
	t.Helper()
	var out []wsEvent
	for !done(out) {
		ev, err := read(t, conn)
		require.NoError(t, err)
		out = append(out, ev)
	}
	return out
}

func has(action string) func([]wsEvent) bool {
	return func(evs []wsEvent) bool {
		for _, e := range evs {
			if e.action() == action {
				return true
			}
		}
		return false
	}
}

func both(a, b func([]wsEvent) bool) func([]wsEvent) bool {
	return func(evs []wsEvent) bool { return a(evs) && b(evs) }
}

const streamWorkflow = `{"workflow_id":"stream-wf","name":"Stream","version":"1.0.0","nodes":[
 {"id":"start","type":"start","next":"set"},
 {"id":"set","type":"action","actionType":"set_variables","parameters":{"values":{"n":1}},"next":"say"},
 {"id":"say","type":"action","actionType":"send_message","parameters":{"message":"hola"},"next":"end"},
 {"id":"end","type":"end","result":{"summary":"ok"}}]}`

// TestStreamAcrossProcesses: a client of process B receives, in order, the
// events of an execution that process A runs; reconnecting with since loses
// nothing; another tenant's client sees none of them.
func TestStreamAcrossProcesses(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDatabase(t)
	a := newProcess(t, dbURL, processOpts{work: true})
	b := newProcess(t, dbURL, processOpts{})
	tenant, other := fmt.Sprintf("stream-%d", tenantSeq.Add(1)), fmt.Sprintf("stream-%d", tenantSeq.Add(1))
	a.define(t, tenant, streamWorkflow)
	a.define(t, other, streamWorkflow)

	conn := b.dial(t, tenant, url.Values{"execution_id": {"exec-stream-1"}}, false)
	otherConn := b.dial(t, other, url.Values{}, false)
	a.start(t, engine.StartParams{TenantID: tenant, WorkflowID: "stream-wf", ExecutionID: "exec-stream-1", CorrelationID: "corr-1"})
	a.start(t, engine.StartParams{TenantID: other, WorkflowID: "stream-wf", ExecutionID: "exec-other-1"})

	evs := readUntil(t, conn, both(has(engine.EventCompleted), has(engine.EventMessageDelivered)))
	var workflowActions, steps []string
	for i, e := range evs {
		if i > 0 {
			require.Greater(t, e.EventID, evs[i-1].EventID, "event ids increase")
		}
		require.Equal(t, tenant, e.TenantID)
		require.Equal(t, "baton", e.SourceService)
		require.Equal(t, "exec-stream-1", e.Metadata.ExecutionID)
		require.Equal(t, "stream-wf", e.Metadata.WorkflowID)
		if e.Type.Domain == "workflow" {
			workflowActions = append(workflowActions, e.action())
		}
		if e.action() == engine.EventStepUpdate {
			steps = append(steps, e.Payload["step_id"].(string))
			require.Equal(t, "completed", e.Payload["status"])
		}
	}
	require.Equal(t, engine.EventStarted, workflowActions[0])
	require.Equal(t, engine.EventCompleted, workflowActions[len(workflowActions)-1])
	require.Equal(t, []string{"start", "set", "say", "end"}, steps)

	// Reconnecting with since replays exactly what followed.
	again := b.dial(t, tenant, url.Values{"execution_id": {"exec-stream-1"}, "since": {fmt.Sprint(evs[1].EventID)}}, false)
	replayed := readUntil(t, again, func(got []wsEvent) bool { return len(got) == len(evs)-2 })
	for i, e := range replayed {
		require.Equal(t, evs[i+2].EventID, e.EventID)
	}

	// The other tenant sees its own execution, and nothing of the first;
	// its replay from 0 neither.
	otherEvs := readUntil(t, otherConn, has(engine.EventCompleted))
	replay := b.dial(t, other, url.Values{"since": {"0"}}, false)
	otherEvs = append(otherEvs, readUntil(t, replay, has(engine.EventCompleted))...)
	for _, e := range otherEvs {
		require.Equal(t, other, e.TenantID)
		require.Equal(t, "exec-other-1", e.Metadata.ExecutionID)
	}
}

// TestStreamWaitsForEarlierIDs: an event whose id is drawn first but whose
// transaction commits last is still delivered, before the later id.
func TestStreamWaitsForEarlierIDs(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDatabase(t)
	p := newProcess(t, dbURL, processOpts{})
	tenant := fmt.Sprintf("stream-%d", tenantSeq.Add(1))
	p.define(t, tenant, streamWorkflow)
	x := p.start(t, engine.StartParams{TenantID: tenant, WorkflowID: "stream-wf", ExecutionID: "exec-order"})
	conn := p.dial(t, tenant, url.Values{"execution_id": {"exec-order"}, "since": {"0"}}, false)
	started, err := read(t, conn)
	require.NoError(t, err)
	require.Equal(t, engine.EventStarted, started.action())

	ctx := context.Background()
	insert := `INSERT INTO execution_event (tenant_id, execution_id, action, message, node_id, payload)
	           VALUES ($1, $2, 'workflow.step_update', $3, $3, jsonb_build_object('step_id', $3::text, 'status', 'completed'))
	           RETURNING id`
	early, err := p.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = early.Rollback(ctx) }()
	var earlyID, lateID int64
	require.NoError(t, early.QueryRow(ctx, insert, tenant, x.ID, "early").Scan(&earlyID))
	require.NoError(t, p.pool.QueryRow(ctx, insert, tenant, x.ID, "late").Scan(&lateID)) // commits at once
	require.Less(t, earlyID, lateID)

	// Nothing may arrive while the earlier id is in flight.
	waitCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, _, err = conn.Read(waitCtx)
	cancel()
	require.Error(t, err, "the later event must not be delivered before the earlier one commits")
	// A timed-out Read closes a coder/websocket connection: dial again
	// from the start event.
	conn = p.dial(t, tenant, url.Values{"execution_id": {"exec-order"}, "since": {fmt.Sprint(started.EventID)}}, false)

	require.NoError(t, early.Commit(ctx))
	first, err := read(t, conn)
	require.NoError(t, err)
	second, err := read(t, conn)
	require.NoError(t, err)
	require.Equal(t, []int64{earlyID, lateID}, []int64{first.EventID, second.EventID})
}

// TestStreamClosesSlowClient: a client that stops reading is closed with
// 4000 and the last event_id it got, while a fast client keeps receiving;
// reconnecting with that since gets the rest.
func TestStreamClosesSlowClient(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDatabase(t)
	p := newProcess(t, dbURL, processOpts{work: true, buffer: 64 << 10, smallSockets: true, writeTimeout: time.Minute})
	tenant := fmt.Sprintf("stream-%d", tenantSeq.Add(1))
	// Each run writes about 40 KB of step events in one transaction: under
	// the 64 KB buffer, so a reading client keeps up, but a few runs are far
	// more than a client that reads nothing can hold.
	big := strings.Repeat("x", 4096)
	nodes := []string{`{"id":"start","type":"start","next":"n0"}`}
	for i := range 8 {
		nodes = append(nodes, fmt.Sprintf(`{"id":"n%d","type":"action","actionType":"set_variables","parameters":{"values":{"v":%q}},"next":"n%d"}`, i, big, i+1))
	}
	nodes = append(nodes, `{"id":"n8","type":"end","result":{"summary":"ok"}}`)
	p.define(t, tenant, `{"workflow_id":"big","name":"Big","version":"1.0.0","nodes":[`+strings.Join(nodes, ",")+`]}`)

	slow := p.dial(t, tenant, url.Values{"workflow_id": {"big"}}, true)
	fast := p.dial(t, tenant, url.Values{"workflow_id": {"big"}}, false)
	var all []wsEvent
	for i := range 5 {
		id := fmt.Sprintf("exec-big-%d", i)
		p.start(t, engine.StartParams{TenantID: tenant, WorkflowID: "big", ExecutionID: id})
		all = append(all, readUntil(t, fast, func(evs []wsEvent) bool {
			return len(evs) > 0 && evs[len(evs)-1].action() == engine.EventCompleted
		})...)
	}
	require.Equal(t, 5*12, len(all)) // per run: started, 10 step updates, completed
	for i := 1; i < len(all); i++ {
		require.Greater(t, all[i].EventID, all[i-1].EventID)
	}

	var got []wsEvent
	var closeErr error
	for {
		ev, err := read(t, slow)
		if err != nil {
			closeErr = err
			break
		}
		got = append(got, ev)
	}
	require.Equal(t, httpapi.CloseSlowConsumer, websocket.CloseStatus(closeErr), "close error: %v", closeErr)
	require.Less(t, len(got), len(all))
	var ce websocket.CloseError
	require.ErrorAs(t, closeErr, &ce)
	lastID := int64(0)
	if len(got) > 0 {
		lastID = got[len(got)-1].EventID
		require.Equal(t, all[len(got)-1].EventID, lastID, "the slow client got a prefix of the stream")
	}
	require.Contains(t, ce.Reason, fmt.Sprintf("since=%d", lastID))

	resumed := p.dial(t, tenant, url.Values{"workflow_id": {"big"}, "since": {fmt.Sprint(lastID)}}, false)
	rest := readUntil(t, resumed, func(evs []wsEvent) bool { return len(got)+len(evs) == len(all) })
	require.Equal(t, all[len(all)-1].EventID, rest[len(rest)-1].EventID)
}
