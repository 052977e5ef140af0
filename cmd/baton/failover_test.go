package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/pgcluster"
)

// failoverStandbyName is the standby's application_name, which the primary's
// synchronous_standby_names names.
const failoverStandbyName = "baton_standby"

// failoverRecoveryBound is how soon after the promotion every process must
// answer a write with a 2xx again.
const failoverRecoveryBound = 10 * time.Second

// probeFlow is a workflow with no thread work: an execution of it completes
// as soon as River runs its step.
const probeFlow = `{"workflow_id": "probe", "version": "1", "nodes": [
  {"id": "start", "type": "start", "next": "set"},
  {"id": "set", "type": "action", "actionType": "set_variables", "parameters": {"values": {"probed": true}}, "next": "end"},
  {"id": "end", "type": "end", "result": {"summary": "ok"}}]}`

// Failover in seconds: two `baton serve` processes run on a
// primary with a synchronous standby, through one multi-host DATABASE_URL
// with target_session_attrs=read-write. Under load — inbound messages on
// chat threads, executions that wait for an event, the events that resume
// them, and a probe execution every 100 ms per process — the primary is
// killed (pg_ctl stop -m immediate) and, a second later, the standby
// promoted. Clients retry what was not answered 2xx with the same ids
// (message_id, execution_id with an envelope message_id, event_id), as the
// API asks. Then:
//   - every request answered 2xx, before, during or after the switch, is on
//     the new primary exactly once: inbound messages by message_id,
//     executions by execution_id, events by event_id;
//   - every process answers a write 2xx again within 10 s of the promotion,
//     without a restart;
//   - every answer that is not 2xx is a 503, and the HTTP servers never
//     stopped answering;
//   - every process's River runs jobs on the new primary, and every
//     process's live event hub streams new events to a WebSocket client
//     that was connected before the switch.
func TestFailoverToSynchronousStandby(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	primary, standby := replicatedClusters(t, ctx)
	url := pgcluster.MultiHostURL(failoverDatabase(t, ctx, primary), primary, standby)

	tool := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(10 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok": true}`))
	}))
	t.Cleanup(tool.Close)
	env, pool, count := serveDatabaseAt(t, url, fmt.Sprintf(
		`{agents: {defaults: {maxConcurrent: 50}}, tools: {slow: {type: "http", url: %q, timeout: "10s", retry: {max: 0}}}}`, tool.URL))
	out, err := command(t, env, "migrate").CombinedOutput()
	require.NoError(t, err, "%s", out)
	servers := []*server{startServer(t, env), startServer(t, env)}
	for _, def := range append(crashFlows(), probeFlow) {
		servers[0].define(t, def)
	}
	for k := range failoverThreads {
		status, body := servers[0].post(t, "/api/v1/threads", map[string]any{"thread_id": chatThread(k), "channel": "whatsapp", "contact": chatThread(k),
			"default_workflow_id": "chat", "queue": map[string]any{"mode": "collect", "debounce_ms": 0}})
		require.Equal(t, http.StatusCreated, status, "%s", body)
	}
	streams := make([]*probeStream, len(servers))
	for i, s := range servers {
		streams[i] = openProbeStream(t, s)
	}

	load := newFailoverLoad(servers)
	load.start()
	time.Sleep(3 * time.Second)

	killedAt := time.Now()
	require.NoError(t, primary.StopImmediate(ctx))
	deadAt := time.Now()
	time.Sleep(time.Second) // an operator, Patroni or the cloud decides
	promoteAt := time.Now()
	require.NoError(t, standby.Promote(ctx))
	promotedAt := time.Now()
	t.Logf("primary killed (pg_ctl stop -m immediate took %v); promotion began %v later and took %v",
		deadAt.Sub(killedAt).Round(time.Millisecond), promoteAt.Sub(killedAt).Round(time.Millisecond), promotedAt.Sub(promoteAt).Round(time.Millisecond))

	// Every process answers a write 2xx again, by itself.
	require.Eventually(t, func() bool {
		for i := range servers {
			if _, ok := load.firstOK(i, promotedAt); !ok {
				return false
			}
		}
		return true
	}, failoverRecoveryBound+5*time.Second, 10*time.Millisecond, "a process does not answer writes 2xx after the promotion")
	var switchEnd time.Time
	for i := range servers {
		at, _ := load.firstOK(i, promotedAt)
		t.Logf("process %d: first 2xx write %v after the promotion", i, at.Sub(promotedAt).Round(time.Millisecond))
		require.LessOrEqual(t, at.Sub(promotedAt), failoverRecoveryBound, "process %d answered no write 2xx within %v of the promotion", i, failoverRecoveryBound)
		if at.After(switchEnd) {
			switchEnd = at
		}
	}
	time.Sleep(3 * time.Second)
	unanswered := load.finish(30 * time.Second)

	// The processes are the ones started before the switch.
	for i, s := range servers {
		select {
		case <-s.done:
			t.Fatalf("process %d exited", i)
		default:
		}
	}

	// The HTTP servers always answered, and every logical request was
	// answered 2xx in the end.
	all := load.tally(time.Time{}, time.Time{})
	before, during, after := load.tally(time.Time{}, killedAt), load.tally(killedAt, switchEnd), load.tally(switchEnd, time.Now())
	t.Logf("requests: %d answered (%s)", all.total, all)
	t.Logf("before the kill: %d (%s), the last 2xx %v before it", before.total, before, killedAt.Sub(before.lastOK).Round(time.Millisecond))
	t.Logf("during the switch (%v, kill to each process's first 2xx): %d (%s)", switchEnd.Sub(killedAt).Round(time.Millisecond), during.total, during)
	t.Logf("after: %d (%s)", after.total, after)
	t.Logf("2xx latency before the kill: %s; overall: %s", load.latency(killedAt), load.latency(time.Time{}))
	require.Zero(t, all.transport, "requests without an answer: %v", all.errs)
	require.Empty(t, unanswered, "logical requests never answered 2xx")

	// The test pool reaches the new primary too.
	require.Eventually(t, func() bool { return pool.Ping(ctx) == nil }, 10*time.Second, 50*time.Millisecond)
	require.Equal(t, standby.Port(), count(`SELECT current_setting('port')::int`), "the multi-host URL did not find the promoted standby")

	// Every request answered 2xx is in the database exactly once. (Unique
	// keys forbid a second copy; what this can catch is a lost one.)
	acked := load.ackedIDs()
	inbound := idCounts(t, pool, `SELECT external_id, count(*) FROM thread_message WHERE direction = 'in' GROUP BY external_id`)
	executions := idCounts(t, pool, `SELECT execution_id, count(*) FROM agent_execution GROUP BY execution_id`)
	events := idCounts(t, pool, `SELECT event_id, count(*) FROM inbound_event GROUP BY event_id`)
	for kind, counts := range map[string]map[string]int{"inbound": inbound, "execute": executions, "event": events, "probe": executions} {
		require.NotEmpty(t, acked[kind], "no %s request was answered 2xx", kind)
		for _, id := range acked[kind] {
			require.Equal(t, 1, counts[id], "%s %s was answered 2xx and is in the database %d times", kind, id, counts[id])
		}
	}
	t.Logf("answered 2xx: %d inbound messages, %d executions that wait, %d events, %d probes",
		len(acked["inbound"]), len(acked["execute"]), len(acked["event"]), len(acked["probe"]))

	// Each process's River works on the new primary: each finished jobs
	// attempted after the promotion, every probe acknowledged after it
	// completes, and a leader (which runs the maintenance jobs and River's
	// scheduler) holds its term there: the expiry of the term on the new
	// primary moves on.
	leaderAt := time.Now()
	var termEnd time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(max(expires_at), now() - interval '1 hour') FROM river_leader`).Scan(&termEnd))
	require.Eventually(t, func() bool {
		return count(`SELECT count(*) FROM river_leader WHERE expires_at > $1`, termEnd) == 1
	}, 30*time.Second, 100*time.Millisecond, "no River leader renewed or took a term on the new primary")
	t.Logf("a River leader held a term on the new primary %v after the check began", time.Since(leaderAt).Round(100*time.Millisecond))
	probes := load.ackedSince(promotedAt)
	require.NotEmpty(t, probes)
	require.Eventually(t, func() bool {
		return count(`SELECT count(*) FROM agent_execution WHERE execution_id = ANY($1) AND status = 'completed'`, probes) == len(probes)
	}, 20*time.Second, 50*time.Millisecond, "probes acknowledged after the promotion do not complete")
	require.Eventually(t, func() bool {
		return count(`SELECT count(DISTINCT attempted_by[cardinality(attempted_by)]) FROM river_job
			WHERE state = 'completed' AND attempted_at > $1`, promotedAt) == len(servers)
	}, 20*time.Second, 50*time.Millisecond, "not every process's River completed jobs after the promotion")

	// Each process holds its presence lock on the new primary again, and no
	// process was taken for dead (which would hand its running jobs to
	// others while it still runs them).
	present := func() int {
		return count(`SELECT count(*) FROM baton_process WHERE lock_lost_at IS NULL AND locked_at > $1`, killedAt)
	}
	require.Eventually(t, func() bool { return present() == len(servers) }, 10*time.Second, 50*time.Millisecond,
		"%d of %d processes took their presence lock again on the new primary", present(), len(servers))
	for i, s := range servers {
		require.False(t, s.logged("worker processes died; their running jobs were handed back"), "process %d's sweep took a live process for dead", i)
	}

	// Each process's event hub streams events of executions started after
	// the promotion to a client connected before the switch.
	for i, st := range streams {
		require.Eventually(t, func() bool { return st.saw(probes) }, 20*time.Second, 50*time.Millisecond,
			"process %d's WebSocket stream delivered no event of an execution started after the promotion (stream error: %v)", i, st.error())
	}

	// Every answer that is not 2xx is a 503 that says when to retry.
	require.Equal(t, all.total, all.byStatus[http.StatusServiceUnavailable]+all.ok,
		"answers that are neither 2xx nor 503: %s", all)
	require.Equal(t, all.byStatus[http.StatusServiceUnavailable], all.retryable,
		"503 answers without retryable and Retry-After: %s", all)

	// What was left in flight at the kill, for the report.
	t.Logf("at the end: %d inbound messages not consumed yet, %d executions neither completed nor waiting (River rescues steps whose worker lost the database after --rescue-after)",
		count(`SELECT count(*) FROM thread_message WHERE direction = 'in' AND status <> 'consumed'`),
		count(`SELECT count(*) FROM agent_execution WHERE status NOT IN ('completed', 'waiting')`))
}

// failoverThreads is how many chat threads take inbound messages.
const failoverThreads = 6

func chatThread(k int) string { return fmt.Sprintf("chat-%d", k) }

// replicatedClusters starts a primary that waits for a synchronous standby,
// and that standby, skipping the test without PostgreSQL binaries.
func replicatedClusters(t *testing.T, ctx context.Context) (primary, standby *pgcluster.Cluster) {
	t.Helper()
	tmp := t.TempDir()
	// t.TempDir makes its directory and its parent 0700; as root the
	// servers run as the postgres OS user, which must reach them.
	require.NoError(t, os.Chmod(filepath.Dir(tmp), 0o755))
	require.NoError(t, os.Chmod(tmp, 0o755))
	primary, err := pgcluster.Start(ctx, pgcluster.Options{Dir: filepath.Join(tmp, "primary"), Fast: true, SynchronousStandby: failoverStandbyName})
	if errors.Is(err, pgcluster.ErrNoBinaries) {
		t.Skipf("skipping: no PostgreSQL binaries on this machine: %v", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, primary.Stop(context.Background())) })
	standby, err = pgcluster.Start(ctx, pgcluster.Options{Dir: filepath.Join(tmp, "standby"), Fast: true, Primary: primary, StandbyName: failoverStandbyName})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, standby.Stop(context.Background())) })

	conn, err := pgx.Connect(ctx, primary.URL())
	require.NoError(t, err)
	defer conn.Close(ctx)
	require.Eventually(t, func() bool {
		var state string
		err := conn.QueryRow(ctx, "SELECT sync_state FROM pg_stat_replication WHERE application_name = $1", failoverStandbyName).Scan(&state)
		return err == nil && state == "sync"
	}, 30*time.Second, 20*time.Millisecond, "the standby is not the primary's synchronous standby")
	return primary, standby
}

// failoverDatabase creates the database the processes use on the primary
// (the standby receives it) and returns its name.
func failoverDatabase(t *testing.T, ctx context.Context, primary *pgcluster.Cluster) string {
	t.Helper()
	conn, err := pgx.Connect(ctx, primary.URL())
	require.NoError(t, err)
	defer conn.Close(ctx)
	const name = "baton_failover"
	_, err = conn.Exec(ctx, "CREATE DATABASE "+name)
	require.NoError(t, err)
	return name
}

// idCounts runs a query selecting (id, count) rows and returns them as a map.
func idCounts(t *testing.T, pool *pgxpool.Pool, sql string) map[string]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), sql)
	require.NoError(t, err)
	out := map[string]int{}
	for rows.Next() {
		var id *string
		var n int
		require.NoError(t, rows.Scan(&id, &n))
		if id != nil {
			out[*id] = n
		}
	}
	require.NoError(t, rows.Err())
	return out
}

// probeStream is a WebSocket client of one process's event stream, for the
// probe workflow's events.
type probeStream struct {
	mu         sync.Mutex
	executions map[string]bool
	err        error
}

// openProbeStream connects to the process's event stream and reads it in the
// background until the test ends.
func openProbeStream(t *testing.T, s *server) *probeStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	dialCtx, dialCancel := context.WithTimeout(ctx, 10*time.Second)
	defer dialCancel()
	conn, resp, err := websocket.Dial(dialCtx, "ws://"+s.addr+"/api/v1/ws?workflow_id=probe",
		&websocket.DialOptions{HTTPHeader: http.Header{"X-Tenant-Id": []string{"crash"}}})
	require.NoError(t, err)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	conn.SetReadLimit(1 << 20)
	t.Cleanup(func() { _ = conn.CloseNow() })
	st := &probeStream{executions: map[string]bool{}}
	go func() {
		for {
			_, raw, err := conn.Read(ctx)
			if err != nil {
				st.mu.Lock()
				st.err = err
				st.mu.Unlock()
				return
			}
			var ev struct {
				Metadata struct {
					ExecutionID string `json:"execution_id"`
				} `json:"metadata"`
			}
			if json.Unmarshal(raw, &ev) == nil {
				st.mu.Lock()
				st.executions[ev.Metadata.ExecutionID] = true
				st.mu.Unlock()
			}
		}
	}()
	return st
}

// saw reports whether the stream delivered an event of one of executions.
func (st *probeStream) saw(executions []string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return slices.ContainsFunc(executions, func(x string) bool { return st.executions[x] })
}

func (st *probeStream) error() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.err
}
