package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// hostileFlow is a definition whose decision node "check" has the
// condition; with a task it first calls tool "big", which answers a
// 20,000-item list as variable arr.
func hostileFlow(id, condition string, withTask bool) map[string]any {
	first := "check"
	nodes := []any{}
	if withTask {
		first = "fetch"
		nodes = append(nodes, map[string]any{"id": "fetch", "type": "task", "task": "big", "next": "check"})
	}
	nodes = append(nodes,
		map[string]any{"id": "start", "type": "start", "next": first},
		map[string]any{"id": "check", "type": "decision", "condition": condition, "branches": map[string]any{"true": "end", "false": "end"}},
		map[string]any{"id": "end", "type": "end"})
	return map[string]any{"workflow_id": id, "version": "1", "nodes": nodes}
}

// templateBomb renders a 10 KB variable a hundred times, four times over:
// 100 MB of text if nothing stopped it.
func templateBomb() map[string]any {
	hundred := strings.Repeat("{{s}}", 100)
	nodes := []any{map[string]any{"id": "start", "type": "start", "next": "grow1"}}
	for i := 1; i <= 4; i++ {
		nodes = append(nodes, map[string]any{"id": fmt.Sprintf("grow%d", i), "type": "action", "actionType": "set_variables",
			"parameters": map[string]any{"values": map[string]any{"s": hundred}}, "next": fmt.Sprintf("grow%d", i+1)})
	}
	nodes[len(nodes)-1].(map[string]any)["next"] = "say"
	nodes = append(nodes,
		map[string]any{"id": "say", "type": "action", "actionType": "send_message", "parameters": map[string]any{"message": "{{s}}"}, "next": "end"},
		map[string]any{"id": "end", "type": "end"})
	return map[string]any{"workflow_id": "bomb", "version": "1", "nodes": nodes}
}

// chain is a definition of n set_variables nodes in a row.
func chain(n int) map[string]any {
	nodes := []any{map[string]any{"id": "start", "type": "start", "next": "n0"}}
	for i := range n {
		next := "n" + strconv.Itoa(i+1)
		if i == n-1 {
			next = "end"
		}
		nodes = append(nodes, map[string]any{"id": "n" + strconv.Itoa(i), "type": "action", "actionType": "set_variables",
			"parameters": map[string]any{"values": map[string]any{}}, "next": next})
	}
	nodes = append(nodes, map[string]any{"id": "end", "type": "end"})
	return map[string]any{"workflow_id": "long", "version": "1", "nodes": nodes}
}

// rssKB is the resident set of a process, in KiB.
func rssKB(t *testing.T, pid int) int {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			require.NoError(t, err)
			return kb
		}
	}
	t.Fatal("no VmRSS in /proc status")
	return 0
}

// run executes a workflow as the tenant and waits for it to end; it returns
// the execution as the API answers it and how long the request took.
func (s *server) run(t *testing.T, tenant, workflowID string, input map[string]any) (map[string]any, time.Duration) {
	t.Helper()
	began := time.Now()
	status, body := s.postAs(t, tenant, "/api/v1/workflow/execute", map[string]any{
		"workflow_id": workflowID, "input": input, "execution_options": map[string]any{"wait_for_completion": true},
	})
	took := time.Since(began)
	require.Equal(t, http.StatusOK, status, "%s", body)
	var env struct {
		Data map[string]any `json:"data"`
	}
	require.NoError(t, json.Unmarshal(body, &env))
	return env.Data, took
}

// TestHostileTenantCannotHurtOthers plays a hostile tenant against a real
// `baton serve`: every definition that could
// crash, stall or bloat the service is refused when stored with a 400 that
// names the node, or its run fails within a second with an error naming
// the limit. While the hostile runs go on, another tenant's one-message run
// completes as it did before, and the server's RSS grows by less than
// 100 MB.
func TestHostileTenantCannotHurtOthers(t *testing.T) {
	t.Parallel()
	items := make([]string, 20_000)
	for i := range items {
		items[i] = strconv.Itoa(i)
	}
	bigAnswer := []byte(`{"arr": [` + strings.Join(items, ",") + `]}`)
	tool := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(bigAnswer)
	}))
	t.Cleanup(tool.Close)
	// A twentieth of the default condition cost, so that a list of 20,000
	// items is over it: the run-time check is the same for any limit.
	env, _, count := serveDatabase(t, fmt.Sprintf(
		`{agents: {defaults: {maxConcurrent: 8}}, limits: {conditionCost: 50000},
		  tools: {big: {type: "http", url: %q, timeout: "20s", retry: {max: 0}}}}`, tool.URL))
	srv := startServer(t, env)

	// Refused when stored, with the node and the reason.
	for _, tc := range []struct {
		name       string
		definition map[string]any
		want       []string
	}{
		// The expression that made expr allocate a terabyte: CEL has no
		// repeat(), and nothing that grows a string without paying for it.
		{"string bomb", hostileFlow("bomb1", `len(repeat(repeat("ab", 499999), 999999)) > 0`, true), []string{`"node_id":"check"`, "repeat"}},
		// The quadratic loop that held a step transaction for 29 s.
		{"nested loop", hostileFlow("loop", `${arr}.exists(a, ${arr}.exists(b, b < 0))`, true), []string{`"node_id":"check"`, "limits.conditionCost"}},
		// 9,500 nodes took 28.7 s to define.
		{"long chain", chain(9500), []string{`"field":"nodes"`, "limits.nodes"}},
	} {
		began := time.Now()
		status, body := srv.postAs(t, "hostile", "/api/v1/workflow/definitions", tc.definition)
		t.Logf("%s: refused in %s", tc.name, time.Since(began).Round(time.Millisecond))
		require.Equal(t, http.StatusBadRequest, status, "%s: %s", tc.name, body)
		require.Contains(t, string(body), "workflow.define.validation_error", tc.name)
		for _, w := range tc.want {
			require.Contains(t, string(body), w, tc.name)
		}
	}
	require.Zero(t, count(`SELECT count(*) FROM workflow_definition WHERE tenant_id = 'hostile'`))

	// Stored, but each run ends failed at its node with the limit named.
	type runtimeCase struct {
		workflowID string
		input      map[string]any
		node, want string
	}
	runtimeCases := []runtimeCase{
		{"costly", map[string]any{}, "check", "limits.conditionCost"},
		{"divide", map[string]any{"a": 1, "b": 0}, "check", "not a finite number"},
		{"bomb", map[string]any{"s": strings.Repeat("x", 10_000)}, "grow1", "limits.renderBytes"},
	}
	for _, def := range []map[string]any{
		hostileFlow("costly", `${arr}.exists(x, x < 0.0)`, true),
		hostileFlow("divide", `${a} / ${b}`, false),
		templateBomb(),
	} {
		status, body := srv.postAs(t, "hostile", "/api/v1/workflow/definitions", def)
		require.Equal(t, http.StatusCreated, status, "%s", body)
	}
	status, body := srv.postAs(t, "calm", "/api/v1/workflow/definitions", map[string]any{
		"workflow_id": "hello", "version": "1", "nodes": []any{
			map[string]any{"id": "start", "type": "start", "next": "say"},
			map[string]any{"id": "say", "type": "action", "actionType": "send_message", "parameters": map[string]any{"message": "Hola {{name}}"}, "next": "end"},
			map[string]any{"id": "end", "type": "end"},
		}})
	require.Equal(t, http.StatusCreated, status, "%s", body)

	calm := func() time.Duration {
		x, took := srv.run(t, "calm", "hello", map[string]any{"name": "Ana"})
		require.Equal(t, "completed", x["status"])
		return took
	}
	median := func(ds []time.Duration) time.Duration {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)/2]
	}
	var before []time.Duration
	for range 9 {
		before = append(before, calm())
	}
	for _, tc := range runtimeCases { // warm: every code path has run once
		srv.run(t, "hostile", tc.workflowID, tc.input)
	}
	rssBefore := rssKB(t, srv.cmd.Process.Pid)

	// The hostile tenant runs its workflows from four clients at once while
	// the calm tenant runs its own, one at a time.
	stop := make(chan struct{})
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		hostile  []time.Duration
		problems []string
	)
	check := func(tc runtimeCase, x map[string]any, took time.Duration) string {
		xerr, _ := x["error"].(map[string]any)
		message, _ := xerr["message"].(string)
		switch {
		case x["status"] != "failed", xerr["failed_node_id"] != tc.node, xerr["code"] != "workflow.execute.step_failed":
			return fmt.Sprintf("%s: %v", tc.workflowID, x)
		case !strings.Contains(message, tc.want):
			return fmt.Sprintf("%s: error %q does not name %q", tc.workflowID, message, tc.want)
		case took > 5*time.Second: // a second here, more under -race on a loaded machine
			return fmt.Sprintf("%s: the run took %s to fail", tc.workflowID, took)
		}
		return ""
	}
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				tc := runtimeCases[i%len(runtimeCases)]
				x, took := srv.run(t, "hostile", tc.workflowID, tc.input)
				mu.Lock()
				hostile = append(hostile, took)
				if p := check(tc, x, took); p != "" {
					problems = append(problems, p)
				}
				mu.Unlock()
			}
		}()
	}
	var during []time.Duration
	for deadline := time.Now().Add(time.Minute); len(during) < 15 || time.Now().Before(deadline); {
		during = append(during, calm())
		mu.Lock()
		enough := len(hostile) >= 12
		mu.Unlock()
		if enough && len(during) >= 15 {
			break
		}
	}
	close(stop)
	wg.Wait()
	rssAfter := rssKB(t, srv.cmd.Process.Pid)
	require.Empty(t, problems)

	t.Logf("calm run: median %s before, %s while %d hostile runs failed (median %s, slowest %s); RSS %d → %d MB",
		median(before), median(during), len(hostile), median(hostile), hostile[len(hostile)-1], rssBefore/1024, rssAfter/1024)
	require.GreaterOrEqual(t, len(hostile), 12, "the hostile runs must be in flight while the calm tenant runs")
	require.Less(t, rssAfter-rssBefore, 100*1024, "RSS grew by %d MB", (rssAfter-rssBefore)/1024)
	// Generous: a calm run is some tens of milliseconds; a hostile run
	// holding a core or the thread's transaction would make it seconds.
	require.Less(t, median(during), max(10*median(before), time.Second), "the calm tenant's runs slowed down")
	require.Zero(t, count(`SELECT count(*) FROM agent_execution WHERE status IN ('running', 'pending')`))
	require.Zero(t, count(`SELECT count(*) FROM thread_message WHERE length(body) > 300000`))
}
