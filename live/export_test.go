package live

// CursorForTest is the hub's cursor: every event with an id at or below it
// has been fanned out.
func (h *Hub) CursorForTest() int64 { return h.currentCursor() }
