package httpapi_test

import (
	"encoding/json"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// python3WithRequests returns the python3 to run the seed's client with, or
// skips the test saying what is missing.
func python3WithRequests(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: skipping the seed 003 (7.6) Python client test")
	}
	if out, err := exec.Command(py, "-c", "import requests, urllib3").CombinedOutput(); err != nil {
		t.Skipf("the Python package requests is not installed (pip install requests): skipping the seed 003 (7.6) Python client test: %s", out)
	}
	return py
}

// Seed 003's Python client (section 7.6, copied verbatim into
// testdata/workflow_engine_client.py) works unchanged against Baton: it
// starts an execution, and a request Baton refuses surfaces as its
// WorkflowEngineError with Baton's error code.
func TestSeedPythonClient(t *testing.T) {
	t.Parallel()
	py := python3WithRequests(t)
	b := setup(t, setupOpts{})
	b.define(t, helloWorkflow)

	run := func(workflowID string) map[string]any {
		cmd := exec.Command(py, "testdata/run_client.py", b.server.URL, b.tenant, b.token, workflowID, `{"name": "Ana", "visits": 2}`)
		out, err := cmd.Output()
		require.NoError(t, err, "%s", out)
		var res map[string]any
		require.NoError(t, json.Unmarshal(out, &res), "%s", out)
		return res
	}

	res := run("hello")
	require.Contains(t, res, "ok", "%v", res)
	resp := res["ok"].(map[string]any)
	require.Equal(t, "success", resp["status"], "%v", resp)
	data := resp["data"].(map[string]any)
	id, _ := data["execution_id"].(string)
	require.NotEmpty(t, id)
	done := b.waitTerminal(t, id)
	require.Equal(t, "completed", done["status"])
	require.Equal(t, []any{"start", "set", "decide", "back", "end"}, done["node_path"])

	res = run("no-such-workflow")
	require.Contains(t, res, "error", "%v", res)
	require.Equal(t, "workflow.execute.not_found", res["error"].(map[string]any)["code"])
}
