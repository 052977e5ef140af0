package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/internal/pgtest"
	"github.com/batonrun/baton/jobs"
)

// jobsUIBundle is a JobsUI served at JobsPrefix over a database holding one
// execution whose first step and one wait timeout are River jobs that
// nothing works.
type jobsUIBundle struct {
	pool        *pgxpool.Pool
	server      *httptest.Server
	executionID int64 // the execution's row id
	stepJobID   int64
	timerJobID  int64
}

const oneStepWorkflow = `{
  "workflow_id": "hello", "version": "1.0.0", "name": "Hello",
  "nodes": [
    {"id": "start", "type": "start", "next": "end"},
    {"id": "end", "type": "end", "result": {"said": "hello"}}
  ]}`

func setupJobsUI(t *testing.T) *jobsUIBundle {
	t.Helper()
	ctx := t.Context()
	pool := pgtest.NewPool(t)
	eng, err := engine.New(engine.Config{Pool: pool, DeferFirstStep: true})
	require.NoError(t, err)
	client, err := jobs.NewClient(pool, jobs.Config{Engine: eng, InsertOnly: true})
	require.NoError(t, err)

	const tenant = "tenant-a"
	_, _, err = eng.DefineWorkflow(ctx, pool, tenant, []byte(oneStepWorkflow))
	require.NoError(t, err)
	var x *engine.Execution
	require.NoError(t, eng.WithTx(ctx, func(tx pgx.Tx) error {
		var err error
		x, err = eng.StartExecution(ctx, tx, engine.StartParams{TenantID: tenant, WorkflowID: "hello"})
		return err
	}))
	ins := &jobs.Inserter{Client: client}
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := ins.InsertWaitTimeout(ctx, tx, engine.WaitTimer{ExecutionRowID: x.ID, TenantID: tenant, ExecutionID: x.ExecutionID, WaitSeq: 1, At: time.Now().Add(time.Hour)})
		return err
	}))

	b := &jobsUIBundle{pool: pool, executionID: x.ID}
	b.stepJobID = jobIDOf(t, pool, jobs.StepArgs{}.Kind(), x.ID)
	b.timerJobID = jobIDOf(t, pool, jobs.WaitTimeoutArgs{}.Kind(), x.ID)

	uiCtx, stopUI := context.WithCancel(context.Background())
	t.Cleanup(stopUI)
	ui, err := NewJobsUI(uiCtx, JobsUIConfig{Client: client})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(JobsPrefix+"/", ui)
	b.server = httptest.NewServer(mux)
	t.Cleanup(b.server.Close)
	return b
}

// jobIDOf returns the id of the one job of kind whose args name the
// execution.
func jobIDOf(t *testing.T, pool *pgxpool.Pool, kind string, executionID int64) int64 {
	t.Helper()
	var id int64
	require.NoError(t, pool.QueryRow(t.Context(), `
		SELECT id FROM river_job
		WHERE kind = $1 AND args @> jsonb_build_object('execution_id', $2::bigint)`,
		kind, executionID).Scan(&id))
	return id
}

// get fetches path from the bundle's server and returns the response with
// its body read.
func (b *jobsUIBundle) get(t *testing.T, path string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, b.server.URL+path, nil)
	require.NoError(t, err)
	return b.do(t, req)
}

func (b *jobsUIBundle) do(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := b.server.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}

// listedJob is a job as River UI's job list API answers it.
type listedJob struct {
	ID    int64  `json:"id"`
	Args  string `json:"args"`
	Kind  string `json:"kind"`
	Queue string `json:"queue"`
	State string `json:"state"`
}

// listJobs calls River UI's job list API with query.
func (b *jobsUIBundle) listJobs(t *testing.T, query url.Values) []listedJob {
	t.Helper()
	resp, body := b.get(t, JobsPrefix+"/api/jobs?"+query.Encode())
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, resp.Header.Get("Content-Type"), "application/json")
	var list struct {
		Data []listedJob `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &list), body)
	return list.Data
}

// River UI's index answers at the prefix, told to call its API and load its
// assets under the prefix, and every asset it names answers with its type.
func TestJobsUIServesItsIndexAndAssetsUnderThePrefix(t *testing.T) {
	t.Parallel()
	b := setupJobsUI(t)

	resp, index := b.get(t, JobsPrefix+"/")
	require.Equal(t, http.StatusOK, resp.StatusCode, index)
	require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Contains(t, index, `<div id="root"`)
	require.Contains(t, index, `"apiUrl":"/console/jobs/api"`)
	require.Contains(t, index, `"base":"/console/jobs"`)

	// The bare prefix redirects to the index.
	resp, _ = b.get(t, JobsPrefix)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, JobsPrefix+"/", resp.Request.URL.Path)

	refs := regexp.MustCompile(`(?:href|src)="([^"]+)"`).FindAllStringSubmatch(index, -1)
	var scripts []string
	for _, ref := range refs {
		require.True(t, strings.HasPrefix(ref[1], JobsPrefix+"/"), "the index names %s outside the prefix", ref[1])
		resp, body := b.get(t, ref[1])
		require.Equal(t, http.StatusOK, resp.StatusCode, ref[1])
		require.NotEmpty(t, body, ref[1])
		if strings.HasSuffix(ref[1], ".js") {
			require.Contains(t, resp.Header.Get("Content-Type"), "javascript", "a module script needs a JavaScript type: %s", ref[1])
			scripts = append(scripts, body)
		}
		if strings.HasSuffix(ref[1], ".css") {
			require.Contains(t, resp.Header.Get("Content-Type"), "text/css", ref[1])
		}
	}
	require.Len(t, scripts, 1, "the index loads one entry script")

	// The entry script imports its chunks from beside it.
	chunks := regexp.MustCompile(`from"\./([\w-]+\.js)"`).FindAllStringSubmatch(scripts[0], -1)
	require.NotEmpty(t, chunks)
	for _, chunk := range chunks {
		resp, body := b.get(t, JobsPrefix+"/assets/"+chunk[1])
		require.Equal(t, http.StatusOK, resp.StatusCode, chunk[1])
		require.Contains(t, resp.Header.Get("Content-Type"), "javascript", chunk[1])
		require.NotEmpty(t, body, chunk[1])
	}
}

// River UI's API lists Baton's jobs by state with their kind, queue and
// args, and narrows the list by kind and id the way JobsLink asks it to.
func TestJobsUIListsBatonsJobs(t *testing.T) {
	t.Parallel()
	b := setupJobsUI(t)

	available := b.listJobs(t, url.Values{"state": {"available"}})
	require.Len(t, available, 1)
	step := available[0]
	require.Equal(t, b.stepJobID, step.ID)
	require.Equal(t, "execution.step", step.Kind)
	require.Equal(t, jobs.QueueHigh, step.Queue)
	require.Equal(t, "available", step.State)
	var args jobs.StepArgs
	require.NoError(t, json.Unmarshal([]byte(step.Args), &args), step.Args)
	require.Equal(t, b.executionID, args.ExecutionID)

	scheduled := b.listJobs(t, url.Values{"state": {"scheduled"}})
	require.Len(t, scheduled, 1)
	require.Equal(t, b.timerJobID, scheduled[0].ID)
	require.Equal(t, "execution.wait_timeout", scheduled[0].Kind)

	// The filters JobsLink sets, as River UI's page passes them to its API.
	byKind := b.listJobs(t, url.Values{"state": {"available"}, "kinds": executionJobKinds})
	require.Len(t, byKind, 1)
	require.Equal(t, b.stepJobID, byKind[0].ID)
	require.Empty(t, b.listJobs(t, url.Values{"state": {"available"}, "kinds": {"lane.sweep"}}))
	byID := b.listJobs(t, url.Values{"state": {"scheduled"}, "ids": {fmt.Sprint(b.timerJobID), fmt.Sprint(b.stepJobID)}})
	require.Len(t, byID, 1)
	require.Equal(t, b.timerJobID, byID[0].ID)

	resp, body := b.get(t, JobsPrefix+fmt.Sprintf("/api/jobs/%d", b.stepJobID))
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `"kind":"execution.step"`)

	// The sidebar's counts by state.
	resp, body = b.get(t, JobsPrefix+"/api/states")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var counts map[string]struct {
		Count int `json:"count"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &counts), body)
	require.Equal(t, 1, counts["available"].Count, body)
	require.Equal(t, 1, counts["scheduled"].Count, body)
	require.Equal(t, 0, counts["running"].Count, body)
}

// The pages JobsLink and JobLink open are River UI's page, which reads the
// filters from the address in the browser.
func TestJobsLinksOpenRiverUI(t *testing.T) {
	t.Parallel()
	b := setupJobsUI(t)

	for _, link := range []string{
		JobsLink(JobsPrefix, ""),
		JobsLink(JobsPrefix, rivertype.JobStateScheduled, b.timerJobID),
		JobLink(JobsPrefix, b.stepJobID),
	} {
		resp, body := b.get(t, link)
		require.Equal(t, http.StatusOK, resp.StatusCode, link)
		require.Contains(t, body, `"base":"/console/jobs"`, link)
	}
}

// The addresses follow River UI's routes: lists as one parameter with
// literal commas, a trailing slash on the prefix dropped.
func TestJobsLinkAddresses(t *testing.T) {
	t.Parallel()
	require.Equal(t,
		"/console/jobs/jobs/?kind=execution.step,execution.wait_timeout,workflow.callback",
		JobsLink(JobsPrefix, ""))
	require.Equal(t,
		"/console/jobs/jobs/?kind=execution.step,execution.wait_timeout,workflow.callback&id=12,7&state=retryable",
		JobsLink("/console/jobs/", rivertype.JobStateRetryable, 12, 7))
	require.Equal(t, "/ops/jobs/jobs/?kind=execution.step,execution.wait_timeout,workflow.callback&state=running",
		JobsLink("ops/jobs", rivertype.JobStateRunning))
	require.Equal(t, "/console/jobs/jobs/42", JobLink(JobsPrefix, 42))
}

// River UI acts on jobs through POSTs; one a browser sends from another
// site is refused before it reaches River UI, one from the console's own
// pages goes through.
func TestJobsUIRefusesCrossSiteActions(t *testing.T) {
	t.Parallel()
	b := setupJobsUI(t)
	cancel := func(fetchSite string) *http.Response {
		body := fmt.Sprintf(`{"ids": ["%d"]}`, b.stepJobID)
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, b.server.URL+JobsPrefix+"/api/jobs/cancel", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Sec-Fetch-Site", fetchSite)
		resp, _ := b.do(t, req)
		return resp
	}
	state := func() string {
		var s string
		require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT state::text FROM river_job WHERE id = $1`, b.stepJobID).Scan(&s))
		return s
	}

	require.Equal(t, http.StatusForbidden, cancel("cross-site").StatusCode)
	require.Equal(t, "available", state())

	require.Equal(t, http.StatusOK, cancel("same-origin").StatusCode)
	require.Equal(t, "cancelled", state())
}

func TestNewJobsUIRequiresAClient(t *testing.T) {
	t.Parallel()
	_, err := NewJobsUI(t.Context(), JobsUIConfig{})
	require.ErrorContains(t, err, "Client is required")
}
