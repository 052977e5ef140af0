package console_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/httpapi"
)

// deepInput is an execution input whose "deep" value nests {"a": …}
// depth levels deep: what the API accepts (its JSON decoder stops at
// 10,000 levels), ~120 KB at 9,990.
func deepInput(depth int) string {
	return `{"name":"Ana","deep":` + strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth) + "}"
}

// apiCall sends one API request with a bearer token and answers its
// status and body.
func (s *site) apiCall(t *testing.T, method, path, tenant, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.server.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("X-Tenant-ID", tenant)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var b strings.Builder
	_, err = bufio.NewReader(resp.Body).WriteTo(&b)
	require.NoError(t, err)
	return resp.StatusCode, b.String()
}

// handlerTimes records how long the site's handler took for each
// request of a path.
type handlerTimes struct {
	mu    sync.Mutex
	times map[string][]time.Duration
}

func (h *handlerTimes) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		next.ServeHTTP(w, r)
		took := time.Since(start)
		h.mu.Lock()
		defer h.mu.Unlock()
		h.times[r.URL.Path] = append(h.times[r.URL.Path], took)
	})
}

func (h *handlerTimes) of(path string) []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Duration(nil), h.times[path]...)
}

// procStatusKB reads a field of /proc/self/status in kB.
func procStatusKB(t *testing.T, field string) int64 {
	t.Helper()
	raw, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for line := range strings.Lines(string(raw)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			require.NoError(t, err)
			return kb
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// processCPU is the CPU time the process has used, user and system.
func processCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestExecutionPageOfADeepValueIsBounded views an execution whose input
// nests 9,990 levels deep, four times at once: the views take under 300
// ms of the server's CPU each, each answers within the page timeout
// however loaded the machine is, and the process's peak RSS grows by less
// than 100 MB. The page shows the value cut and where to read it whole.
// (Before values were rendered within a budget, each view took 3 to 12 s
// and the four grew the process by over 1 GB.)
func TestExecutionPageOfADeepValueIsBounded(t *testing.T) {
	if _, err := os.Stat("/proc/self/clear_refs"); err != nil {
		t.Skip("needs Linux's /proc/self/clear_refs to measure peak RSS")
	}
	timing := &handlerTimes{times: map[string][]time.Duration{}}
	s := newSite(t, siteOpts{wrap: timing.wrap})
	tenant := newTenant()
	s.define(t, tenant, waitWorkflow)
	body := `{"payload":{"workflow_id":"waiter","thread_id":"t-deep","input":` + deepInput(9990) + `}}`
	status, answer := s.apiCall(t, http.MethodPost, "/api/v1/workflow/execute", tenant,
		s.token(t, tenant, httpapi.ScopeWorkflowsRead, httpapi.ScopeWorkflowsWrite), body)
	require.Equal(t, http.StatusAccepted, status, answer)
	var started struct {
		Data struct {
			ExecutionID string `json:"execution_id"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(answer), &started))
	id := started.Data.ExecutionID
	path := "/console/executions/" + id

	b := s.browser(t)
	require.Equal(t, http.StatusSeeOther, b.signIn(s.token(t, tenant)).status)
	first := b.get(path)
	require.Equal(t, http.StatusOK, first.status)

	// Peak RSS is measured from here: writing 5 to clear_refs resets
	// VmHWM to the current RSS.
	require.NoError(t, os.WriteFile("/proc/self/clear_refs", []byte("5"), 0))
	before := procStatusKB(t, "VmRSS")
	cpu := processCPU(t)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			p := b.get(path)
			require.Equal(t, http.StatusOK, p.status)
		})
	}
	wg.Wait()
	cpu = processCPU(t) - cpu
	grew := procStatusKB(t, "VmHWM") - before
	times := timing.of(path)
	require.Len(t, times, 5)
	t.Logf("four concurrent views: handler times %v, %v of CPU in all; peak RSS grew %d kB", times[1:], cpu, grew)
	require.Less(t, cpu/4, 300*time.Millisecond, "CPU time of a view of the deep execution")
	for _, took := range times[1:] {
		require.Less(t, took, 10*time.Second, "a view of the deep execution answers within the page timeout")
	}
	require.Less(t, grew, int64(100<<10), "peak RSS growth in kB")

	require.Less(t, len(first.body), 1<<20, "the page is bounded")
	require.True(t, strings.Contains(first.body, `id="variables-cut"`), "the page says the value was cut")
	require.True(t, strings.Contains(first.body, `href="/api/v1/workflow/executions/`+id+`"`), "and where to read it whole")
	whole := b.get("/api/v1/workflow/executions/" + id)
	require.Equal(t, http.StatusOK, whole.status, "the console's session reads the value whole from the API")
	require.Equal(t, 9990, strings.Count(whole.body, `{"a":`))
}

// TestThreadPageClipsLongMessages: a message's text is shown up to 4 KiB
// on the thread page, with how much more there is and where to read it.
func TestThreadPageClipsLongMessages(t *testing.T) {
	t.Parallel()
	s := newSite(t, siteOpts{})
	tenant := newTenant()
	s.define(t, tenant, waitWorkflow)
	name := strings.Repeat("n", 10<<10) + "END"
	s.start(t, engine.StartParams{TenantID: tenant, WorkflowID: "waiter", ThreadID: "t-long", Input: map[string]any{"name": name}})
	b := s.browser(t)
	require.Equal(t, http.StatusSeeOther, b.signIn(s.token(t, tenant)).status)
	p := b.get("/console/threads/t-long")
	require.Equal(t, http.StatusOK, p.status)
	require.True(t, strings.Contains(p.body, "Hola "+strings.Repeat("n", 4<<10-5)+`<span class="cut">… (6 KiB more: <a href="/api/v1/threads/t-long/messages">`),
		"the message is cut at 4 KiB and says how much is left")
	require.False(t, strings.Contains(p.body, "END"), "the end of the message is not on the page")
}
