package console

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"riverqueue.com/riverui"

	"github.com/batonrun/baton/jobs"
)

// JobsPrefix is the path the console serves River UI under.
const JobsPrefix = "/console/jobs"

// JobsUIConfig configures a JobsUI.
type JobsUIConfig struct {
	// Client is Baton's River client (jobs.NewClient). River UI reads jobs
	// and queues, and retries, cancels and deletes jobs and pauses queues,
	// through it and the pool of its driver; the client need not be started.
	// Required.
	Client *river.Client[pgx.Tx]
	// Logger receives River UI's log lines: refused API calls (at info),
	// API calls that failed or timed out, and failures of its background
	// job counts (at error). Nil discards them.
	Logger *slog.Logger
	// Prefix is the path JobsUI is served under, such as "/console/jobs";
	// a trailing slash is dropped. Empty means JobsPrefix.
	Prefix string
}

// JobsUI serves River UI, River's job browser, and the JSON API its pages
// call, under a path prefix: the index at Prefix+"/", the API under
// Prefix+"/api/", the assets under Prefix+"/assets/". Mount it at
// Prefix+"/" as is: it strips the prefix itself.
//
// River UI is not tenant-scoped: it shows every tenant's jobs, their args
// included, and can retry, cancel and delete any job and pause any queue.
// JobsUI does no authentication or authorization of its own; whoever mounts
// it must let only operators reach it. It does reject cross-origin browser
// requests that are not GET, HEAD or OPTIONS (http.CrossOriginProtection),
// so that a page elsewhere cannot make an operator's browser act on jobs.
type JobsUI struct {
	handler http.Handler
}

// NewJobsUI builds River UI on cfg.Client and starts its background work
// (the cached job counts of its sidebar), which runs until ctx is done; the
// JobsUI should serve no requests after that.
func NewJobsUI(ctx context.Context, cfg JobsUIConfig) (*JobsUI, error) {
	if cfg.Client == nil {
		return nil, errors.New("console: JobsUIConfig.Client is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = JobsPrefix
	}
	ui, err := riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(cfg.Client, nil),
		Logger:    cfg.Logger,
		Prefix:    cfg.Prefix,
	})
	if err != nil {
		return nil, fmt.Errorf("creating River UI handler: %w", err)
	}
	if err := ui.Start(ctx); err != nil {
		return nil, fmt.Errorf("starting River UI: %w", err)
	}
	return &JobsUI{handler: http.NewCrossOriginProtection().Handler(ui)}, nil
}

// ServeHTTP serves River UI's pages, assets and API.
func (j *JobsUI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	j.handler.ServeHTTP(w, r)
}

// executionJobKinds are the kinds of Baton's jobs that act for one execution
// and carry its row id in their args (execution_id).
var executionJobKinds = []string{
	jobs.StepArgs{}.Kind(),
	jobs.WaitTimeoutArgs{}.Kind(),
	jobs.CallbackArgs{}.Kind(),
}

// JobsLink returns the address of River UI's job list, served under prefix,
// narrowed to the kinds of Baton's jobs that act for one execution (its
// steps, wait timeouts and callbacks) in state; an empty state means River
// UI's default, running. jobIDs, when given, narrow it to those jobs.
//
// River UI cannot filter jobs by their args, so without jobIDs the list
// holds these jobs of every execution. A caller that wants only one
// execution's jobs finds their ids in river_job by args (execution_id) and
// passes them; JobLink opens a single job whatever its state.
func JobsLink(prefix string, state rivertype.JobState, jobIDs ...int64) string {
	// River UI reads a list as one parameter whose items are separated by
	// literal commas: kind=a,b. An escaped comma or a repeated key would
	// not be read as a list.
	params := []string{"kind=" + joinEscaped(executionJobKinds)}
	if len(jobIDs) > 0 {
		ids := make([]string, len(jobIDs))
		for i, id := range jobIDs {
			ids[i] = strconv.FormatInt(id, 10)
		}
		params = append(params, "id="+strings.Join(ids, ","))
	}
	if state != "" {
		params = append(params, "state="+url.QueryEscape(string(state)))
	}
	return riverui.NormalizePathPrefix(prefix) + "/jobs/?" + strings.Join(params, "&")
}

// JobLink returns the address of River UI's page of one job, served under
// prefix.
func JobLink(prefix string, jobID int64) string {
	return riverui.NormalizePathPrefix(prefix) + "/jobs/" + strconv.FormatInt(jobID, 10)
}

// joinEscaped query-escapes each item and joins them with commas.
func joinEscaped(items []string) string {
	escaped := make([]string, len(items))
	for i, item := range items {
		escaped[i] = url.QueryEscape(item)
	}
	return strings.Join(escaped, ",")
}
