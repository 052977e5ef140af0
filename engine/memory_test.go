package engine

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine/workflow"
	"github.com/batonrun/baton/internal/pgtest"
)

// A process that sees version after version of small definitions keeps no
// more of them than its bound, whatever their size: the least recently
// used go first, with both their keys.
func TestDefinitionCacheKeepsAtMostItsVersions(t *testing.T) {
	t.Parallel()
	c := newDefinitionCache(100, definitionCacheBytes)
	def := func(id int64) *StoredDefinition {
		return &StoredDefinition{ID: id, TenantID: "t", Raw: []byte(`{}`),
			Definition: &workflow.Definition{WorkflowID: "w", Version: fmt.Sprint(id)}}
	}
	for id := int64(1); id <= 5000; id++ {
		c.add(def(id))
		require.LessOrEqual(t, c.len(), 100)
		require.Equal(t, c.byID.Len(), len(c.byKey))
	}
	require.Equal(t, 100, c.len())
	require.Equal(t, 100*entrySize(def(0)), c.bytes)
	_, ok := c.byVersion("t", "w", "4900")
	require.False(t, ok)
	got, ok := c.byVersion("t", "w", "4901")
	require.True(t, ok)
	require.Equal(t, int64(4901), got.ID)
}

// A process that takes lane after lane (a session lane per thread) keeps no
// more of them in mind than its bound, the least recently used forgotten
// first.
func TestKnownLanesKeepAtMostTheirBound(t *testing.T) {
	t.Parallel()
	k := newKnownLanes(100)
	for i := range 5000 {
		k.remember("t", SessionLane(fmt.Sprint("thread-", i)))
		require.LessOrEqual(t, k.len(), 100)
	}
	require.Equal(t, 100, k.len())
	require.False(t, k.has("t", SessionLane("thread-4899")))
	require.True(t, k.has("t", SessionLane("thread-4900")))
	require.False(t, k.has("u", SessionLane("thread-4900")), "lanes are per owner")
	k.forget("t", SessionLane("thread-4900"))
	require.False(t, k.has("t", SessionLane("thread-4900")))
}

func smallDefinition(version int) []byte {
	return fmt.Appendf(nil, `{"workflow_id": "w", "version": "1.%d", "nodes": [
	  {"id": "start", "type": "start", "next": "end"},
	  {"id": "end", "type": "end", "result": {"summary": "v%d"}}]}`, version, version)
}

// With a cache of three versions, an engine that stores fifty keeps three,
// and every version, evicted or not, is read back whole: an evicted one
// from the database.
func TestEvictedDefinitionIsReadAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, err := New(Config{Pool: pgtest.NewPool(t), DefinitionCacheVersions: 3})
	require.NoError(t, err)
	ids := map[int]int64{}
	for v := range 50 {
		d, created, err := e.DefineWorkflow(ctx, e.pool, "acme", smallDefinition(v))
		require.NoError(t, err)
		require.True(t, created)
		ids[v] = d.ID
		require.LessOrEqual(t, e.definitions.len(), 3)
	}
	for v := range 50 {
		d, err := e.GetDefinition(ctx, e.pool, "acme", "w", fmt.Sprint("1.", v))
		require.NoError(t, err)
		require.Equal(t, ids[v], d.ID)
		require.Equal(t, fmt.Sprint("v", v), d.Node("end").Result["summary"])
		require.LessOrEqual(t, e.definitions.len(), 3)
	}
	latest, err := e.GetDefinition(ctx, e.pool, "acme", "w", "")
	require.NoError(t, err)
	require.Equal(t, ids[49], latest.ID)
	_, err = New(Config{Pool: e.pool, DefinitionCacheVersions: -1})
	require.Error(t, err)
}

// With room for three lanes in mind, an engine that takes fifty session
// lanes remembers three; a lane it forgot is learned again on its next
// use, and so is one whose row was deleted meanwhile, known or not.
func TestEvictedLaneIsLearnedAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	e, err := New(Config{Pool: pool, KnownLanes: 3})
	require.NoError(t, err)
	lock := func(thread int) {
		t.Helper()
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			l, ok, err := e.lockLane(ctx, tx, "acme", SessionLane(fmt.Sprint("thread-", thread)), true)
			if err == nil {
				require.True(t, ok)
				require.Equal(t, int32(1), l.MaxConcurrent)
			}
			return err
		}))
		require.LessOrEqual(t, e.lanesKnown.len(), 3)
	}
	for i := range 50 {
		lock(i)
	}
	rows := func() int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM lane WHERE name LIKE 'session:%'`).Scan(&n))
		return n
	}
	require.Equal(t, 50, rows())

	require.False(t, e.lanesKnown.has("acme", SessionLane("thread-0")))
	lock(0)
	require.True(t, e.lanesKnown.has("acme", SessionLane("thread-0")))

	_, err = pool.Exec(ctx, `DELETE FROM lane WHERE name IN ('session:thread-0', 'session:thread-1')`)
	require.NoError(t, err)
	require.True(t, e.lanesKnown.has("acme", SessionLane("thread-0")))
	require.False(t, e.lanesKnown.has("acme", SessionLane("thread-1")))
	lock(0)
	lock(1)
	require.Equal(t, 50, rows())
	_, err = New(Config{Pool: pool, KnownLanes: -1})
	require.Error(t, err)
}
