package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// python3WithRequests returns the python3 to run the Python client with, or
// skips the test saying what is missing.
func python3WithRequests(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: skipping the test of the Python client in examples/python")
	}
	if out, err := exec.Command(py, "-c", "import requests, urllib3").CombinedOutput(); err != nil {
		t.Skipf("the Python package requests is not installed (pip install requests): skipping the test of the Python client in examples/python: %s", out)
	}
	return py
}

// The Python client of examples/python runs unchanged against the baton
// binary: under `baton dev` it starts the stored example, and a workflow
// that does not exist surfaces as its WorkflowEngineError with Baton's
// code; under `baton serve`, a token signed with another secret surfaces
// the same way, while a good one gets past authentication.
func TestPythonClient(t *testing.T) {
	t.Parallel()
	py := python3WithRequests(t)
	t.Run("baton dev", func(t *testing.T) {
		t.Parallel()
		base := startDev(t)
		res := runPythonClient(t, py, "--url", base, "hello", `{"name": "Ana", "visits": 2}`)
		require.Contains(t, res, "ok", "%v", res)
		answer := res["ok"].(map[string]any)
		require.Equal(t, "success", answer["status"], "%v", answer)
		id, _ := answer["data"].(map[string]any)["execution_id"].(string)
		require.NotEmpty(t, id, "%v", answer)
		done := waitDevExecution(t, base, id)
		require.Equal(t, "completed", done["status"], "%v", done)
		require.Equal(t, []any{"start", "remember", "returning", "welcome_back", "end"}, done["node_path"])

		res = runPythonClient(t, py, "--url", base, "no-such-workflow")
		require.Equal(t, "workflow.execute.not_found", clientErrorCode(t, res), "%v", res)
	})
	t.Run("baton serve with tokens", func(t *testing.T) {
		t.Parallel()
		const secret, otherSecret = "python-client-secret-0123456789ab", "another-secret-0123456789abcdefgh"
		env, _, _ := serveDatabase(t, `{}`)
		// startServer serves without auth unless told otherwise.
		s := startServer(t, append(env, "BATON_JWT_SECRET="+secret), "--insecure-no-auth=false")
		base := "http://" + s.addr

		res := runPythonClient(t, py, "--url", base, "--tenant", "acme", "--token", mintToken(t, secret, "acme"), "no-such-workflow")
		require.Equal(t, "workflow.execute.not_found", clientErrorCode(t, res), "a good token gets past authentication: %v", res)
		res = runPythonClient(t, py, "--url", base, "--tenant", "acme", "--token", mintToken(t, otherSecret, "acme"), "no-such-workflow")
		require.Equal(t, "workflow.access.unauthorized", clientErrorCode(t, res), "%v", res)
	})
}

// startDev runs `baton dev` on a database of its own and returns the base
// URL it serves on.
func startDev(t *testing.T) string {
	t.Helper()
	cmd := command(t, []string{"DATABASE_URL=" + cappedPool(t, emptyDatabase(t))}, "dev", "--addr", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = io.Discard
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		_ = cmd.Wait()
	})
	serving := regexp.MustCompile(`serving on (http://\S+)`)
	found := make(chan string, 1)
	go func() {
		defer close(found)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := serving.FindStringSubmatch(sc.Text()); m != nil && len(found) == 0 {
				found <- m[1]
			}
		}
	}()
	select {
	case base, ok := <-found:
		require.True(t, ok, "baton dev exited before serving")
		return base
	case <-time.After(60 * time.Second):
		t.Fatal("baton dev did not serve within 60s")
		return ""
	}
}

// runPythonClient runs examples/python/run_client.py with args and returns
// the JSON line it prints.
func runPythonClient(t *testing.T, py string, args ...string) map[string]any {
	t.Helper()
	cmd := exec.Command(py, append([]string{"run_client.py"}, args...)...)
	cmd.Dir = "../../examples/python"
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "BATON_TOKEN=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
		require.NoError(t, err, "stdout: %s\nstderr: %s", out, stderr.String())
	}
	var res map[string]any
	require.NoError(t, json.Unmarshal(out, &res), "stdout: %s\nstderr: %s", out, stderr.String())
	return res
}

// clientErrorCode returns the code of the WorkflowEngineError the client
// raised.
func clientErrorCode(t *testing.T, res map[string]any) string {
	t.Helper()
	e, ok := res["error"].(map[string]any)
	require.True(t, ok, "the client raised no WorkflowEngineError: %v", res)
	code, _ := e["code"].(string)
	return code
}

// mintToken mints a token for the tenant with `baton token`, signed with
// secret.
func mintToken(t *testing.T, secret, tenant string) string {
	t.Helper()
	out, err := command(t, []string{"BATON_JWT_SECRET=" + secret}, "token", "--tenant", tenant).Output()
	require.NoError(t, err, "%s", out)
	return strings.TrimSpace(string(out))
}

// waitDevExecution polls the execution on baton dev (tenant dev) until it
// is terminal and returns it.
func waitDevExecution(t *testing.T, base, executionID string) map[string]any {
	t.Helper()
	var x map[string]any
	require.Eventually(t, func() bool {
		req, err := http.NewRequest(http.MethodGet, base+"/api/v1/workflow/executions/"+executionID, nil)
		if err != nil {
			return false
		}
		req.Header.Set("X-Tenant-ID", devTenant)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var body struct {
			Data map[string]any `json:"data"`
		}
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&body) != nil {
			return false
		}
		x = body.Data
		return terminalExecution(x)
	}, 30*time.Second, 25*time.Millisecond, "execution %s: %v", executionID, x)
	return x
}
