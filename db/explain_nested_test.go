package db_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/db/dbsqlc"
)

// nestedCases are the queries that call functions (outbox_claim,
// clear_stale_locks…): EXPLAIN shows a Function Scan, so they run for
// real, in a transaction rolled back, with auto_explain reporting the plan
// of every statement they run.
func nestedCases() []queryCase {
	return []queryCase{
		{"OutboxClaim", slice, func(r *recorder) {
			_, _ = q.OutboxClaim(ctx, r, &dbsqlc.OutboxClaimParams{ThreadID: 97000, Key: 7_000_000_001, Max: 50})
		}},
		{"OutboxNext", slice, func(r *recorder) {
			_, _ = q.OutboxNext(ctx, r, &dbsqlc.OutboxNextParams{ThreadID: 97000, Max: 50, Epoch: 1})
		}},
		{"OutboxClaimMany", slice, func(r *recorder) {
			_, _ = q.OutboxClaimMany(ctx, r, &dbsqlc.OutboxClaimManyParams{
				ThreadIds: []int64{97000, 97001}, Keys: []int64{7_000_000_001, 7_000_000_002}, Max: 50})
		}},
		{"OutboxFinishMany", slice, func(r *recorder) {
			_, _ = q.OutboxFinishMany(ctx, r, &dbsqlc.OutboxFinishManyParams{
				ThreadIds: []int64{97000, 97001}, Keys: []int64{7_000_000_001, 7_000_000_002},
				MessageIds: []int64{97000, 97001}, ThreadKeys: []string{"thread-97000", "thread-97001"},
				ExecutionKeys: []string{"exec-97000", "exec-97001"}, Channels: []string{"api", "api"}, Epoch: 1})
		}},
		{"ThreadCleanupStaleLocks", live, func(r *recorder) { _, _ = q.ThreadCleanupStaleLocks(ctx, r, 600) }},
		{"ThreadCleanupStaleLocksByTenant", live, func(r *recorder) {
			_, _ = q.ThreadCleanupStaleLocksByTenant(ctx, r, &dbsqlc.ThreadCleanupStaleLocksByTenantParams{
				LockTimeoutSeconds: 600, TenantID: "t42"})
		}},
	}
}

// exempt are the queries of db/queries that read no table that grows with
// traffic, so have no plan to check, with why.
var exempt = map[string]string{
	"EventFence":               "reads the event id sequence",
	"EventSequenceLast":        "reads the event id sequence",
	"EventSequenceRaise":       "moves the event id sequence",
	"MessageIDNext":            "draws from the message id sequence",
	"EventWritersXmin":         "reads pg_locks, only when a transaction is older than wanted",
	"MonitorCLILanesAvailable": "reads the catalog",
	"ProcessRegister":          "baton_process holds a row per running process",
	"ProcessUnregister":        "baton_process holds a row per running process",
	"ProcessSweepLock":         "takes an advisory lock",
	"OutboxReapLock":           "takes an advisory lock",
	"ProcessCheck":             "baton_process holds a row per running process",
	"ProcessMarkLost":          "baton_process holds a row per running process",
	"ProcessMarkFound":         "baton_process holds a row per running process",
	"ProcessDelete":            "baton_process holds a row per running process",
	"LeaderResignGone":         "river_leader holds one row",
	"LaneTryShare":             "takes an advisory lock",
	"LaneLockExclusive":        "takes an advisory lock",
	"LaneTryExclusive":         "takes an advisory lock",
	// The retention sweep's batches are checked at a million rows by
	// retention/plan_test.go, on data shaped for them (expired, protected
	// and recent rows of several tenants).
	"RetentionSweepExecutions":         "planned in retention/plan_test.go",
	"RetentionSweepIdempotencyKeys":    "planned in retention/plan_test.go",
	"RetentionSweepInboundEvents":      "planned in retention/plan_test.go",
	"ConsoleSessionDeleteExpired":      "planned in retention/plan_test.go",
	"OperatorSessionDeleteExpired":     "planned in retention/plan_test.go",
	"RetentionForgetInboundMessageIDs": "planned in retention/plan_test.go",
	"RetentionSweepInboundMessages":    "planned in retention/plan_test.go",
}

// checkCoverage requires that every query of db/queries is a case or
// exempt, so that a new query gets its plan checked.
func checkCoverage(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("queries", "*.sql"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	covered := map[string]bool{}
	for _, c := range append(queryCases(), nestedCases()...) {
		name, _, _ := strings.Cut(c.name, "/")
		covered[name] = true
	}
	nameRE := regexp.MustCompile(`(?m)^-- name: (\w+)`)
	var missing []string
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range nameRE.FindAllStringSubmatch(string(src), -1) {
			if !covered[m[1]] && exempt[m[1]] == "" {
				missing = append(missing, m[1])
			}
		}
	}
	sort.Strings(missing)
	require.Empty(t, missing, "queries with no plan check: add a case, or an exemption with its reason")
}

// explainNested runs r's statement on a connection of its own, in a
// transaction it rolls back, with auto_explain reporting the plan of every
// statement run, nested ones included, and returns the plans that read a
// table. Loading auto_explain takes a superuser.
func explainNested(t *testing.T, pool *pgxpool.Pool, r recorder) []plan {
	t.Helper()
	var mu sync.Mutex
	var notices []string
	cfg := pool.Config().ConnConfig.Copy()
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		defer mu.Unlock()
		notices = append(notices, n.Message)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer func() { _ = conn.Close(ctx) }()
	if super, err := isSuperuser(ctx, conn); err != nil || !super {
		require.NoError(t, err)
		t.Skip("loading auto_explain takes a superuser")
	}
	for _, s := range []string{
		"LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0", "SET auto_explain.log_nested_statements = on",
		"SET auto_explain.log_level = notice", "SET auto_explain.log_format = json",
	} {
		_, err := conn.Exec(ctx, s)
		require.NoError(t, err, s)
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, r.sql, r.args...)
		if err != nil {
			return err
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		return errRecorded // rolls the transaction back
	})
	require.ErrorIs(t, err, errRecorded)
	mu.Lock()
	defer mu.Unlock()
	return tablePlans(t, notices)
}

// tablePlans parses auto_explain's notices and returns the plans that read
// some table.
func tablePlans(t *testing.T, notices []string) []plan {
	t.Helper()
	var plans []plan
	for _, n := range notices {
		_, body, ok := strings.Cut(n, "plan:\n")
		if !ok {
			continue
		}
		var p plan
		require.NoError(t, json.Unmarshal([]byte(body), &p), body)
		p.raw = body
		reads := false
		p.Plan.walk(func(n *planNode) { reads = reads || n.Relation != "" })
		if reads {
			plans = append(plans, p)
		}
	}
	require.NotEmpty(t, plans, "auto_explain reported no plan reading a table")
	return plans
}
