package console

import (
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/httpapi"
)

// Bounds of the thread pages.
const (
	timelineRows = 200
	locksShown   = 100
)

// threadsView is what templates/threads.html shows.
type threadsView struct {
	Locks []engine.ActiveLock
}

// threadsPage opens a thread by id and lists the threads whose lock is
// held now, oldest lock first.
func (c *Console) threadsPage(w http.ResponseWriter, r *http.Request, sess httpapi.Session) error {
	if id := r.URL.Query().Get("thread_id"); id != "" {
		http.Redirect(w, r, Prefix+"threads/"+url.PathEscape(id), http.StatusFound)
		return nil
	}
	locks, err := c.engine.ListLocks(r.Context(), c.pool, sess.TenantID, engine.LockPage{Limit: locksShown})
	if err != nil {
		return err
	}
	return c.show(w, sess, page{Name: "threads", Data: threadsView{Locks: locks}})
}

// threadView is what templates/thread.html shows.
type threadView struct {
	T *engine.Thread
	// Timeline is the conversation, oldest first.
	Timeline []timelineRow
	// Older shows the messages before the first one shown; empty when
	// there are none.
	Older string
	// Queued are the messages waiting now: outbound ones for the lock,
	// inbound ones for a run to take them.
	Queued []timelineRow
	// QueueSources lists the effective queue settings with where each
	// comes from, in a fixed order.
	QueueSources []queueSetting
	QueueModes   []string
}

// queueSetting is one effective queue setting and where it comes from.
type queueSetting struct {
	Name, Value, Source string
}

// timelineRow is one message of the conversation.
type timelineRow struct {
	*dbsqlc.ConsoleTimelineRow
	// LockWait is how long the message waited for the thread's lock (an
	// outbound message) or for a run to take it (a queued inbound one).
	LockWait *time.Duration
}

// Queued reports whether the message is waiting now.
func (t timelineRow) Queued() bool {
	return t.Status == "queued" || (t.Direction == "in" && (t.Status == "received" || t.Status == "steer"))
}

// threadPage shows one thread's conversation, lock and queue.
func (c *Console) threadPage(w http.ResponseWriter, r *http.Request, sess httpapi.Session) error {
	ctx := r.Context()
	t, err := c.engine.GetThread(ctx, c.pool, sess.TenantID, r.PathValue("id"))
	if err != nil {
		return err
	}
	before := int64(math.MaxInt64)
	if v := r.URL.Query().Get("before"); v != "" {
		if before, err = strconv.ParseInt(v, 10, 64); err != nil || before <= 0 {
			return badRequestf("before must be a positive message id")
		}
	}
	rows, err := dbsqlc.New().ConsoleTimeline(ctx, c.pool, &dbsqlc.ConsoleTimelineParams{ThreadID: t.ID, BeforeID: before, Max: timelineRows + 1})
	if err != nil {
		return err
	}
	view := threadView{T: t, QueueModes: queueModes}
	if len(rows) > timelineRows {
		rows = rows[:timelineRows]
		view.Older = Prefix + "threads/" + url.PathEscape(t.ThreadID) + "?before=" + strconv.FormatInt(rows[len(rows)-1].ID, 10)
	}
	// In the order they reached the other end: an outbound message when it
	// was delivered (one still queued or pending last), an inbound one when
	// it arrived.
	slices.Reverse(rows)
	slices.SortStableFunc(rows, func(a, b *dbsqlc.ConsoleTimelineRow) int { return seenAt(a).Compare(seenAt(b)) })
	for _, m := range rows {
		row := timelineRow{ConsoleTimelineRow: m, LockWait: lockWait(m)}
		view.Timeline = append(view.Timeline, row)
		if row.Queued() {
			view.Queued = append(view.Queued, row)
		}
	}
	q := t.Queue
	view.QueueSources = []queueSetting{
		{"mode", q.Mode, q.Sources["mode"]},
		{"debounce_ms", strconv.Itoa(q.DebounceMS), q.Sources["debounce_ms"]},
		{"cap", strconv.Itoa(q.Cap), q.Sources["cap"]},
		{"drop", q.Drop, q.Sources["drop"]},
	}
	return c.show(w, sess, page{Name: "thread", Title: "Thread " + t.ThreadID,
		Stream: "thread_id=" + url.QueryEscape(t.ThreadID), Data: view})
}

// queueModes are the modes the queue form offers.
var queueModes = []string{"collect", "followup", "steer", "steer-backlog", "interrupt", "queue"}

// lockWait is how long a message waited: an outbound one queued for the
// lock until it was delivered, an inbound one from its arrival until a run
// took it.
func lockWait(m *dbsqlc.ConsoleTimelineRow) *time.Duration {
	var end *time.Time
	switch {
	case m.Direction == "out" && m.WasQueued:
		end = m.DeliveredAt
	case m.Direction == "in" && m.Outcome != nil && *m.Outcome == "queued":
		end = m.ConsumedAt
	}
	if end == nil {
		return nil
	}
	d := end.Sub(m.CreatedAt)
	return &d
}

// seenAt is when a message reached the other end of the thread: an
// outbound one when it was delivered, an inbound one when it arrived; one
// still queued or pending sorts after all of them, and one dropped or
// failed where it was written.
func seenAt(m *dbsqlc.ConsoleTimelineRow) time.Time {
	switch {
	case m.Direction == "in":
		return m.CreatedAt
	case m.DeliveredAt != nil:
		return *m.DeliveredAt
	case m.Status == "queued" || m.Status == "pending":
		return time.Unix(1<<40, 0)
	default: // dropped or failed: where it was written
		return m.CreatedAt
	}
}
