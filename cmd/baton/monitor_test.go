package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/pgtest"
)

// monitorDatabase returns a migrated database holding, for tenant acme, a
// pending execution, a running one holding a fresh lock, a waiting one, a
// stuck one (timeout two hours past, untouched for three) and a waiting one
// holding a lock taken 20 minutes ago; for tenant globex, a waiting execution
// and a completed one.
func monitorDatabase(t *testing.T) (url string, conn *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	url = pgtest.NewDatabase(t)
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	thread := func(tenant, id string) int64 {
		var tid int64
		require.NoError(t, conn.QueryRow(ctx,
			`INSERT INTO thread (tenant_id, thread_id, channel, contact) VALUES ($1, $2, 'test', $2) RETURNING id`,
			tenant, id).Scan(&tid))
		return tid
	}
	exec := func(tenant, id string, threadID int64, status, waitingUntil, updatedAt string) int64 {
		var eid int64
		require.NoError(t, conn.QueryRow(ctx, `
			INSERT INTO agent_execution (tenant_id, execution_id, workflow_id, version, thread_id, status,
			                             waiting_for, waiting_until, updated_at, created_at)
			VALUES ($1, $2, 'recruiting', 'v1', $3, $4::execution_status,
			        CASE WHEN $4 = 'waiting' THEN 'user_response' END,
			        now() + $5::interval, now() + $6::interval, now() + $6::interval)
			RETURNING id`, tenant, id, threadID, status, waitingUntil, updatedAt).Scan(&eid))
		return eid
	}
	lock := func(threadID, execID int64, age string) {
		_, err := conn.Exec(ctx, `UPDATE thread SET active_execution_id = $2, execution_locked_at = now() - $3::interval WHERE id = $1`,
			threadID, execID, age)
		require.NoError(t, err)
	}
	a1, a2, a3 := thread("acme", "th-a1"), thread("acme", "th-a2"), thread("acme", "th-a3")
	exec("acme", "ex-pending", a1, "pending", "0", "0")
	lock(a1, exec("acme", "ex-running", a1, "running", "0", "0"), "1 minute")
	exec("acme", "ex-waiting", a3, "waiting", "1 hour", "0")
	exec("acme", "ex-stuck", a3, "waiting", "-2 hours", "-3 hours")
	lock(a2, exec("acme", "ex-holder", a2, "waiting", "1 hour", "-20 minutes"), "20 minutes")
	g1 := thread("globex", "th-g1")
	exec("globex", "ex-g-waiting", g1, "waiting", "30 minutes", "0")
	exec("globex", "ex-g-done", g1, "completed", "0", "0")
	return url, conn
}

// monitorJSON is the part of --json's object the tests check.
type monitorJSON struct {
	Tenant  *string          `json:"tenant"`
	Totals  map[string]int64 `json:"totals"`
	Status  []statusRow      `json:"status"`
	Waiting struct {
		Total int64          `json:"total"`
		Rows  []executionRow `json:"rows"`
	} `json:"waiting"`
	Stuck struct {
		Total int64          `json:"total"`
		Rows  []executionRow `json:"rows"`
	} `json:"stuck"`
	ActiveLocks lockList `json:"active_locks"`
	StaleLocks  lockList `json:"stale_locks"`
	Lanes       struct {
		Available bool             `json:"available"`
		Columns   []string         `json:"columns"`
		Total     int              `json:"total"`
		Rows      []map[string]any `json:"rows"`
	} `json:"lanes"`
}

func runMonitorJSON(t *testing.T, url string, args ...string) monitorJSON {
	t.Helper()
	out, err := command(t, []string{"DATABASE_URL=" + url}, append([]string{"monitor", "--json"}, args...)...).Output()
	require.NoError(t, err, "%s", out)
	var got monitorJSON
	require.NoError(t, json.Unmarshal(out, &got), "%s", out)
	return got
}

// secondField matches a table row up to the end of its second column.
var secondField = regexp.MustCompile(`^\S+\s+\S+`)

// columnOf returns where header's column name starts, for checking that the
// rows under it line up.
func columnOf(t *testing.T, line, name string) int {
	t.Helper()
	i := strings.Index(line, name)
	require.GreaterOrEqual(t, i, 0, "%q in %q", name, line)
	return i
}

// The tables show every view across tenants, aligned; --tenant filters them;
// --json carries the same figures.
func TestMonitorTablesAndJSON(t *testing.T) {
	t.Parallel()
	url, _ := monitorDatabase(t)

	out, err := command(t, []string{"DATABASE_URL=" + url}, "monitor").CombinedOutput()
	require.NoError(t, err, "%s", out)
	text := string(out)
	require.Contains(t, text, "baton monitor · all tenants")
	require.Contains(t, text, "EXECUTIONS  pending 1 · running 1 · waiting 4")
	require.Contains(t, text, "WAITING (4)")
	require.Contains(t, text, "STUCK (timeout passed, untouched for 1h) (1)")
	require.Contains(t, text, "ACTIVE LOCKS (2)")
	require.Contains(t, text, "STALE LOCKS (held over 10m) (1)")
	require.Contains(t, text, "LANES (") // the lanes migration's view
	require.NotContains(t, text, "ex-g-done")

	lines := strings.Split(text, "\n")
	find := func(re string) int {
		r := regexp.MustCompile(re)
		for i, l := range lines {
			if r.MatchString(l) {
				return i
			}
		}
		t.Fatalf("no line matches %s in\n%s", re, text)
		return -1
	}
	// The status table: header, then one aligned row per tenant and status.
	h := find(`^TENANT\s+STATUS\s+COUNT\s+AVG AGE$`)
	require.Regexp(t, `^acme\s+pending\s+1\s+\d+s$`, lines[h+1])
	require.Regexp(t, `^acme\s+running\s+1\s+`, lines[h+2])
	require.Regexp(t, `^acme\s+waiting\s+3\s+`, lines[h+3])
	require.Regexp(t, `^globex\s+waiting\s+1\s+`, lines[h+4])
	for _, row := range lines[h+1 : h+5] {
		require.Equal(t, columnOf(t, lines[h], "STATUS"), secondField.FindStringIndex(row)[1]-len(strings.Fields(row)[1]), "aligned: %q", row)
	}
	// The stuck table lists ex-stuck under its header.
	s := find(`^STUCK`)
	require.Regexp(t, `^TENANT\s+EXECUTION\s+WORKFLOW\s+THREAD\s+WAITING FOR\s+UNTIL\s+WAITED$`, lines[s+1])
	require.Regexp(t, `^acme\s+ex-stuck\s+recruiting\s+th-a3\s+user_response\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ\s+[23]h\d\dm$`, lines[s+2])
	require.Equal(t, columnOf(t, lines[s+1], "EXECUTION"), columnOf(t, lines[s+2], "ex-stuck"))
	// The stale lock table lists th-a2 held by ex-holder for about 20 minutes.
	l := find(`^STALE LOCKS`)
	require.Regexp(t, `^TENANT\s+THREAD\s+EXECUTION\s+LOCKED AT\s+HELD$`, lines[l+1])
	require.Regexp(t, `^acme\s+th-a2\s+ex-holder\s+\S+ \S+\s+(19|20|21)m\d\ds$`, lines[l+2])

	all := runMonitorJSON(t, url)
	require.Nil(t, all.Tenant)
	require.Equal(t, map[string]int64{"pending": 1, "running": 1, "waiting": 4}, all.Totals)
	require.Len(t, all.Status, 4)
	require.EqualValues(t, 4, all.Waiting.Total)
	require.Len(t, all.Waiting.Rows, 4)
	require.EqualValues(t, 1, all.Stuck.Total)
	require.Equal(t, "ex-stuck", all.Stuck.Rows[0].ExecutionID)
	require.EqualValues(t, 2, all.ActiveLocks.Total)
	require.EqualValues(t, 1, all.StaleLocks.Total)
	require.Equal(t, "ex-holder", all.StaleLocks.Rows[0].ActiveExecutionID)
	require.True(t, all.Lanes.Available)

	// --limit caps the rows, not the totals.
	limited := runMonitorJSON(t, url, "--limit", "2")
	require.EqualValues(t, 4, limited.Waiting.Total)
	require.Len(t, limited.Waiting.Rows, 2)

	globex := runMonitorJSON(t, url, "--tenant", "globex")
	require.Equal(t, "globex", *globex.Tenant)
	require.Equal(t, map[string]int64{"waiting": 1}, globex.Totals)
	require.EqualValues(t, 1, globex.Waiting.Total)
	require.Equal(t, "ex-g-waiting", globex.Waiting.Rows[0].ExecutionID)
	require.Zero(t, globex.Stuck.Total)
	require.Zero(t, globex.ActiveLocks.Total)
	require.Zero(t, globex.StaleLocks.Total)
	require.Empty(t, globex.StaleLocks.Rows)
}

// The lanes section reads monitor_lanes: the global lanes (shared by every
// tenant, so they show whatever --tenant says) and the session lanes with
// work of the tenant asked for.
func TestMonitorShowsLanes(t *testing.T) {
	t.Parallel()
	url, conn := monitorDatabase(t)
	ctx := context.Background()
	_, err := conn.Exec(ctx, `INSERT INTO lane (tenant_id, name, max_concurrent) VALUES ('acme', 'session:th-a1', 1)`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `UPDATE agent_execution SET session_key = 'session:th-a1' WHERE execution_id = 'ex-pending'`)
	require.NoError(t, err)

	got := runMonitorJSON(t, url, "--tenant", "acme")
	require.True(t, got.Lanes.Available)
	require.Equal(t, []string{"tenant_id", "lane", "max_concurrent", "running", "pending", "oldest_pending_age_ms"}, got.Lanes.Columns)
	require.Equal(t, 4, got.Lanes.Total)
	main := got.Lanes.Rows[1]
	require.Equal(t, "", main["tenant_id"])
	require.Equal(t, "main", main["lane"])
	require.EqualValues(t, 4, main["max_concurrent"])
	require.EqualValues(t, 1, main["running"])
	require.EqualValues(t, 1, main["pending"])
	session := got.Lanes.Rows[3]
	require.Equal(t, "acme", session["tenant_id"])
	require.Equal(t, "session:th-a1", session["lane"])
	require.EqualValues(t, 1, session["max_concurrent"])
	require.EqualValues(t, 1, session["pending"])
	require.Equal(t, 3, runMonitorJSON(t, url, "--tenant", "globex").Lanes.Total, "another tenant's session lanes are not shown")

	out, err := command(t, []string{"DATABASE_URL=" + url}, "monitor").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.NotContains(t, string(out), "not available")
	require.Regexp(t, `(?m)^LANES \(4\)\nTENANT_ID\s+LANE\s+MAX_CONCURRENT\s+RUNNING\s+PENDING\s+OLDEST_PENDING_AGE_MS\n\(all\)\s+cron\s+2\s+0\s+0\s+0\n\(all\)\s+main\s+4\s+1\s+1\s+\d+\n\(all\)\s+subagent\s+8\s+0\s+0\s+0\nacme\s+session:th-a1\s+1\s+0\s+1\s+\d+$`, string(out))
}

// --watch prints a frame per interval, clearing the screen between them, and
// stops cleanly on Ctrl-C; without a migrated schema the monitor says so.
func TestMonitorWatchAndUnmigrated(t *testing.T) {
	t.Parallel()
	url, _ := monitorDatabase(t)
	cmd := command(t, []string{"DATABASE_URL=" + url}, "monitor", "--watch", "50ms")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = io.Discard
	require.NoError(t, cmd.Start())
	frames := make(chan struct{}, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), clearScreen+"baton monitor · all tenants") {
				frames <- struct{}{}
			}
		}
		close(frames)
	}()
	for range 2 {
		select {
		case _, ok := <-frames:
			require.True(t, ok, "baton monitor --watch exited early")
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatal("no two frames within 30s")
		}
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	require.NoError(t, cmd.Wait(), "Ctrl-C ends the watch with status 0")

	out, err := command(t, []string{"DATABASE_URL=" + emptyDatabase(t)}, "monitor").CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), `run "baton migrate" first`)
}
