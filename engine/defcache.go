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

// DefaultDefinitionCacheVersions is how many parsed definition versions a
// process keeps by default (Config.DefinitionCacheVersions). entrySize
// counts a definition's JSON, not what parsing it adds (its nodes, maps and
// strings, several times the JSON of a small definition), so the count
// bounds the memory of many small versions that the size alone would not.
const DefaultDefinitionCacheVersions = 10_000

// definitionCache keeps parsed stored definitions by row id, and the row id
// of each (tenant, workflow, version) it holds: at most a number of them,
// within a budget of bytes, the least recently used evicted first. Stored
// definitions are immutable, so an entry never goes stale; an evicted one
// is read again from the database when it is needed.
type definitionCache struct {
	mu    sync.Mutex
	byID  *simplelru.LRU[int64, *StoredDefinition]
	byKey map[string]int64
	// latestSeen holds, for each (tenant, workflow), the row id of the
	// latest version this process last read, while that version is
	// cached: a guess that a start checks (Engine.startDefinition).
	latestSeen map[string]int64
	bytes      int
	budget     int
}

func newDefinitionCache(versions, budget int) *definitionCache {
	c := &definitionCache{byKey: map[string]int64{}, latestSeen: map[string]int64{}, budget: budget}
	c.byID, _ = simplelru.NewLRU(versions, func(id int64, d *StoredDefinition) {
		c.bytes -= entrySize(d)
		delete(c.byKey, versionKey(d.TenantID, d.WorkflowID, d.Version))
		if key := workflowKey(d.TenantID, d.WorkflowID); c.latestSeen[key] == id {
			delete(c.latestSeen, key)
		}
	})
	return c
}

func workflowKey(tenantID, workflowID string) string {
	return tenantID + "\x00" + workflowID
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

// latest returns the cached version of a tenant's workflow last read as its
// latest (sawLatest). Another process may have stored a newer one since.
func (c *definitionCache) latest(tenantID, workflowID string) (*StoredDefinition, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.latestSeen[workflowKey(tenantID, workflowID)]
	if !ok {
		return nil, false
	}
	return c.byID.Get(id)
}

// sawLatest records that d, which the cache holds, was its workflow's latest
// version when it was read.
func (c *definitionCache) sawLatest(d *StoredDefinition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID.Contains(d.ID) {
		c.latestSeen[workflowKey(d.TenantID, d.WorkflowID)] = d.ID
	}
}

// add keeps d, evicting the least recently used definitions until the
// cache holds no more than its number of versions and is within its budget
// again. A definition larger than the whole budget is not kept.
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

// len returns how many definitions are cached.
func (c *definitionCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byID.Len()
}
