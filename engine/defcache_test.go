package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine/workflow"
)

// A tenant storing version after version of a large definition cannot grow
// the cache past its budget: the least recently used go first, and both of
// their keys with them.
func TestDefinitionCacheStaysWithinItsBudget(t *testing.T) {
	t.Parallel()
	c := newDefinitionCache(DefaultDefinitionCacheVersions, 10_000)
	def := func(id int64) *StoredDefinition {
		return &StoredDefinition{ID: id, TenantID: "t", Raw: []byte(strings.Repeat("x", 3000)),
			Definition: &workflow.Definition{WorkflowID: "w", Version: fmt.Sprint(id)}}
	}
	c.add(def(1))
	c.add(def(2))
	c.add(def(3))
	_, ok := c.byRowID(1) // 1 is now the most recently used
	require.True(t, ok)
	for id := int64(4); id <= 100; id++ {
		c.add(def(id))
		require.LessOrEqual(t, c.bytes, c.budget)
		require.Equal(t, c.byID.Len(), len(c.byKey))
	}
	_, ok = c.byVersion("t", "w", "1")
	require.False(t, ok)
	got, ok := c.byVersion("t", "w", "100")
	require.True(t, ok)
	require.Equal(t, int64(100), got.ID)

	c.add(&StoredDefinition{ID: 101, TenantID: "t", Raw: make([]byte, 20_000), Definition: &workflow.Definition{WorkflowID: "big", Version: "1"}})
	_, ok = c.byRowID(101)
	require.False(t, ok, "a definition larger than the budget is not kept")
	_, ok = c.byRowID(100)
	require.True(t, ok, "and evicts nothing")
}
