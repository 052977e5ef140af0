package engine

import (
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// definitionCacheBytes is about how much memory one process spends on
// parsed definitions (entrySize): tenants store definitions of up to
// limits.definitionBytes each, as many versions as they like, so the cache
// is bounded by their size, least recently used first out.
const definitionCacheBytes = 128 << 20

// definitionCache keeps parsed stored definitions by row id, and the row id
// of each (tenant, workflow, version) it holds. Stored definitions are
// immutable, so an entry never goes stale; it is only evicted.
type definitionCache struct {
	mu     sync.Mutex
	byID   *simplelru.LRU[int64, *StoredDefinition]
	byKey  map[string]int64
	bytes  int
	budget int
}

func newDefinitionCache(budget int) *definitionCache {
	c := &definitionCache{byKey: map[string]int64{}, budget: budget}
	// The count bound is never reached first: every entry costs a byte at
	// least (see add).
	c.byID, _ = simplelru.NewLRU(budget, func(_ int64, d *StoredDefinition) {
		c.bytes -= entrySize(d)
		delete(c.byKey, versionKey(d.TenantID, d.WorkflowID, d.Version))
	})
	return c
}

func versionKey(tenantID, workflowID, version string) string {
	return tenantID + "\x00" + workflowID + "\x00" + version
}

// entrySize is about the memory a parsed definition holds: its JSON, and
// for each condition its compiled program, measured at about 5 KiB plus 60
// bytes per byte of source (a 4 KiB condition holds 228 KiB).
func entrySize(d *StoredDefinition) int {
	size := max(len(d.Raw), 1)
	for _, n := range d.Nodes {
		if n.Condition != "" {
			size += 8<<10 + 64*len(n.Condition)
		}
	}
	return size
}

// byRowID returns the definition stored in row id, when it is cached.
func (c *definitionCache) byRowID(id int64) (*StoredDefinition, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byID.Get(id)
}

// byVersion returns a cached version of a tenant's workflow.
func (c *definitionCache) byVersion(tenantID, workflowID, version string) (*StoredDefinition, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.byKey[versionKey(tenantID, workflowID, version)]
	if !ok {
		return nil, false
	}
	return c.byID.Get(id)
}

// add keeps d, evicting the least recently used definitions until the
// cache is within its budget again. A definition larger than the whole
// budget is not kept.
func (c *definitionCache) add(d *StoredDefinition) {
	size := entrySize(d)
	if size > c.budget {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID.Contains(d.ID) {
		return
	}
	c.byID.Add(d.ID, d)
	c.byKey[versionKey(d.TenantID, d.WorkflowID, d.Version)] = d.ID
	c.bytes += size
	for c.bytes > c.budget {
		c.byID.RemoveOldest()
	}
}
