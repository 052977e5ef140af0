package engine

import (
	lru "github.com/hashicorp/golang-lru/v2"
)

// DefaultKnownLanes is how many lane rows a process remembers having seen
// (Config.KnownLanes): one per session lane (a thread that received
// messages) and per tenant lane in use, the least recently used forgotten
// first. Forgetting one costs an INSERT … ON CONFLICT DO NOTHING on its
// next use.
const DefaultKnownLanes = 10_000

// knownLanes remembers the lane rows this process has seen exist, so that
// taking a lane does not insert its row first each time. It is safe for
// concurrent use and holds at most its bound: a lane forgotten is learned
// again on its next use (ensureLane).
type knownLanes struct {
	lanes *lru.Cache[string, struct{}]
}

func newKnownLanes(size int) *knownLanes {
	lanes, err := lru.New[string, struct{}](size)
	if err != nil {
		panic(err) // size is checked by New
	}
	return &knownLanes{lanes: lanes}
}

func laneCacheKey(owner, name string) string { return owner + "\x00" + name }

// has reports whether the lane row (owner, name) is known to exist.
func (k *knownLanes) has(owner, name string) bool {
	_, ok := k.lanes.Get(laneCacheKey(owner, name))
	return ok
}

// remember records that the lane row (owner, name) exists.
func (k *knownLanes) remember(owner, name string) {
	k.lanes.Add(laneCacheKey(owner, name), struct{}{})
}

// forget drops what is remembered of the lane row (owner, name).
func (k *knownLanes) forget(owner, name string) {
	k.lanes.Remove(laneCacheKey(owner, name))
}

// len returns how many lane rows are remembered.
func (k *knownLanes) len() int { return k.lanes.Len() }
