package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// attempt is one HTTP request of the load and its answer.
type attempt struct {
	server         int
	kind, id       string
	sent, answered time.Time
	status         int // 0: no answer (err)
	code           string
	retryable      bool // error.retryable and a Retry-After header
	err            error
}

// failoverLoad sends requests to the processes and records every attempt.
type failoverLoad struct {
	servers []*server
	seq     atomic.Int64
	stop    chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu         sync.Mutex
	attempts   []attempt
	acked      map[string][]string // kind → ids answered 2xx
	ackedAt    map[string]time.Time
	waiting    []string // executions answered 2xx whose event is not sent yet
	unanswered []string // logical requests given up on
}

func newFailoverLoad(servers []*server) *failoverLoad {
	ctx, cancel := context.WithCancel(context.Background())
	return &failoverLoad{servers: servers, stop: make(chan struct{}), ctx: ctx, cancel: cancel,
		acked: map[string][]string{}, ackedAt: map[string]time.Time{}}
}

// start runs three clients per process, which send one logical request
// after another and retry each until it is answered 2xx, and one probe
// per process, which starts a probe execution every 100 ms and never
// retries.
func (l *failoverLoad) start() {
	for w := range 3 * len(l.servers) {
		l.wg.Go(func() { l.client(w % len(l.servers)) })
	}
	for i := range l.servers {
		l.wg.Go(func() { l.probe(i) })
	}
}

// finish stops the load, gives the clients up to grace to get their last
// requests answered, and returns the logical requests never answered 2xx.
func (l *failoverLoad) finish(grace time.Duration) []string {
	close(l.stop)
	timer := time.AfterFunc(grace, l.cancel)
	defer timer.Stop()
	l.wg.Wait()
	l.cancel()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.unanswered
}

func (l *failoverLoad) stopped() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

// client sends inbound messages, executions and events in turn to one
// process.
func (l *failoverLoad) client(s int) {
	for n := 0; !l.stopped(); n++ {
		seq := l.seq.Add(1)
		id := strconv.FormatInt(seq, 10)
		switch n % 3 {
		case 0:
			thread := chatThread(int(seq % failoverThreads))
			l.retry(s, "inbound", "m-"+id, "/api/v1/threads/"+thread+"/messages",
				map[string]any{"payload": map[string]any{"text": "hola " + id, "message_id": "m-" + id}})
		case 1:
			x := "w-" + id
			l.retry(s, "execute", x, "/api/v1/workflow/execute", map[string]any{"message_id": x, "payload": map[string]any{
				"workflow_id": "waitlong", "execution_id": x, "thread_id": "th-" + x, "input": map[string]any{"n": x}}})
		case 2:
			l.mu.Lock()
			var x string
			if len(l.waiting) > 0 {
				x, l.waiting = l.waiting[0], l.waiting[1:]
			}
			l.mu.Unlock()
			if x == "" {
				continue
			}
			l.retry(s, "event", "e-"+x, "/api/v1/events", map[string]any{"payload": map[string]any{
				"event_type": "EVENT_COMPLETED", "event_id": "e-" + x, "execution_id": x, "data": map[string]any{"event_id": "ev"}}})
		}
		select {
		case <-l.stop:
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// probe starts a probe execution on one process every 100 ms.
func (l *failoverLoad) probe(s int) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
		x := fmt.Sprintf("probe-%d-%d", s, n)
		l.send(s, "probe", x, "/api/v1/workflow/execute", map[string]any{"message_id": x, "payload": map[string]any{
			"workflow_id": "probe", "execution_id": x, "thread_id": x}})
	}
}

// retry sends a request until it is answered 2xx, waiting between attempts
// as long as the answer's Retry-After says (200 ms without one, at most
// 2 s), and records it as unanswered when the load's context ends first.
func (l *failoverLoad) retry(s int, kind, id, path string, envelope map[string]any) {
	for {
		a := l.send(s, kind, id, path, envelope)
		if a.status/100 == 2 {
			return
		}
		wait := 200 * time.Millisecond
		if secs, err := strconv.Atoi(a.header.Get("Retry-After")); err == nil {
			wait = min(time.Duration(secs)*time.Second, 2*time.Second)
		}
		select {
		case <-l.ctx.Done():
			l.mu.Lock()
			l.unanswered = append(l.unanswered, kind+" "+id)
			l.mu.Unlock()
			return
		case <-time.After(wait):
		}
	}
}

// send makes one attempt and records it.
func (l *failoverLoad) send(s int, kind, id, path string, envelope map[string]any) answer {
	reqCtx, cancel := context.WithTimeout(l.ctx, 20*time.Second)
	defer cancel()
	at := attempt{server: s, kind: kind, id: id, sent: time.Now()}
	a, err := l.servers[s].send(reqCtx, "crash", path, envelope)
	at.answered, at.status, at.err = time.Now(), a.status, err
	if err == nil && a.status/100 != 2 {
		var e struct {
			Error struct {
				Code      string `json:"code"`
				Retryable bool   `json:"retryable"`
			} `json:"error"`
		}
		_ = json.Unmarshal(a.body, &e)
		at.code = e.Error.Code
		at.retryable = e.Error.Retryable && a.header.Get("Retry-After") != ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.attempts = append(l.attempts, at)
	if at.status/100 == 2 {
		if _, seen := l.ackedAt[kind+" "+id]; !seen {
			l.acked[kind] = append(l.acked[kind], id)
			l.ackedAt[kind+" "+id] = at.answered
			if kind == "execute" {
				l.waiting = append(l.waiting, id)
			}
		}
	}
	return a
}

// firstOK returns when process s first answered 2xx a request sent after
// since.
func (l *failoverLoad) firstOK(s int, since time.Time) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var first time.Time
	for _, a := range l.attempts {
		if a.server == s && a.status/100 == 2 && !a.sent.Before(since) && (first.IsZero() || a.answered.Before(first)) {
			first = a.answered
		}
	}
	return first, !first.IsZero()
}

// ackedIDs returns the ids answered 2xx by kind.
func (l *failoverLoad) ackedIDs() map[string][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]string{}
	for k, ids := range l.acked {
		out[k] = slices.Clone(ids)
	}
	return out
}

// ackedSince returns the probes first answered 2xx for a request sent after
// since.
func (l *failoverLoad) ackedSince(since time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, a := range l.attempts {
		if a.kind == "probe" && a.status/100 == 2 && a.sent.After(since) {
			out = append(out, a.id)
		}
	}
	return out
}

// latency returns, by kind, the median and the largest time a 2xx answer to
// a request sent before until took; a zero until means all.
func (l *failoverLoad) latency(until time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	took := map[string][]time.Duration{}
	for _, a := range l.attempts {
		if a.status/100 == 2 && (until.IsZero() || a.sent.Before(until)) {
			took[a.kind] = append(took[a.kind], a.answered.Sub(a.sent))
		}
	}
	var parts []string
	for _, kind := range slices.Sorted(maps.Keys(took)) {
		d := took[kind]
		slices.Sort(d)
		parts = append(parts, fmt.Sprintf("%s median %v max %v", kind, d[len(d)/2].Round(time.Millisecond), d[len(d)-1].Round(time.Millisecond)))
	}
	return strings.Join(parts, "; ")
}

// loadTally counts attempts by outcome.
type loadTally struct {
	total, ok, transport, retryable int
	lastOK                          time.Time // the last 2xx answer
	byStatus                        map[int]int
	codes                           map[string]int // error codes of answers that are not 2xx
	errs                            []string
}

func (c loadTally) String() string {
	var parts []string
	for _, st := range slices.Sorted(maps.Keys(c.byStatus)) {
		parts = append(parts, fmt.Sprintf("%d: %d", st, c.byStatus[st]))
	}
	if c.transport > 0 {
		parts = append(parts, fmt.Sprintf("no answer: %d", c.transport))
	}
	codes := slices.Collect(maps.Keys(c.codes))
	sort.Strings(codes)
	for _, code := range codes {
		parts = append(parts, fmt.Sprintf("%s ×%d", code, c.codes[code]))
	}
	if c.byStatus[http.StatusServiceUnavailable] > 0 {
		parts = append(parts, fmt.Sprintf("503 retryable with Retry-After: %d", c.retryable))
	}
	return strings.Join(parts, ", ")
}

// tally counts the attempts answered in [from, to); a zero from or to
// leaves that side open.
func (l *failoverLoad) tally(from, to time.Time) loadTally {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := loadTally{byStatus: map[int]int{}, codes: map[string]int{}}
	for _, a := range l.attempts {
		if (!from.IsZero() && a.answered.Before(from)) || (!to.IsZero() && !a.answered.Before(to)) {
			continue
		}
		c.total++
		switch {
		case a.err != nil:
			c.transport++
			if len(c.errs) < 5 {
				c.errs = append(c.errs, a.err.Error())
			}
			continue
		case a.status/100 == 2:
			c.ok++
			if a.answered.After(c.lastOK) {
				c.lastOK = a.answered
			}
		default:
			c.codes[a.code]++
		}
		c.byStatus[a.status]++
		if a.retryable && a.status == http.StatusServiceUnavailable {
			c.retryable++
		}
	}
	return c
}
