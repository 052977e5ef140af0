package console

import (
	"context"
	"encoding/json"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/httpapi"
)

// Bounds of what one page reads, whatever the tenant stored.
const (
	executionsPerPage = 50
	eventsShown       = 500
	treeDepth         = 16  // levels of a family shown above and below
	treeRows          = 200 // executions a family shows
)

// executionStatuses are the statuses the filter offers.
var executionStatuses = []engine.ExecutionStatus{engine.StatusPending, engine.StatusRunning, engine.StatusWaiting,
	engine.StatusCompleted, engine.StatusFailed, engine.StatusTimeout, engine.StatusCancelled}

// executionsView is what templates/executions.html shows.
type executionsView struct {
	Filter     engine.ExecutionFilter
	Statuses   []engine.ExecutionStatus
	Executions []*engine.Execution
	// Older continues the listing after the last row; empty at the end.
	Older     string
	Workflows []string
}

// executionsPage lists the tenant's executions, newest first, filtered.
func (c *Console) executionsPage(w http.ResponseWriter, r *http.Request, sess httpapi.Session) error {
	q := r.URL.Query()
	f := engine.ExecutionFilter{Status: q.Get("status"), WorkflowID: q.Get("workflow_id"), ThreadID: q.Get("thread_id"),
		ParentExecutionID: q.Get("parent_execution_id"), Limit: executionsPerPage + 1}
	if v := q.Get("before"); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id <= 0 {
			return badRequestf("before must be a positive row id")
		}
		f.BeforeID = id
	}
	if f.Status != "" && !validStatus(f.Status) {
		return badRequestf("status %q is not one of pending, running, waiting, completed, failed, timeout, cancelled", f.Status)
	}
	xs, err := c.engine.ListExecutions(r.Context(), c.pool, sess.TenantID, f)
	if err != nil {
		return err
	}
	view := executionsView{Filter: f, Statuses: executionStatuses, Executions: xs}
	if len(xs) > executionsPerPage {
		view.Executions = xs[:executionsPerPage]
		next := url.Values{}
		for k, v := range q {
			next[k] = v
		}
		next.Set("before", strconv.FormatInt(xs[executionsPerPage-1].ID, 10))
		view.Older = Prefix + "executions?" + next.Encode()
	}
	if view.Workflows, err = c.workflowIDs(r.Context(), sess.TenantID); err != nil {
		return err
	}
	stream := ""
	if f.WorkflowID != "" {
		stream = "workflow_id=" + url.QueryEscape(f.WorkflowID)
	} else if f.ThreadID != "" {
		stream = "thread_id=" + url.QueryEscape(f.ThreadID)
	}
	return c.show(w, sess, page{Name: "executions", Stream: stream, Data: view})
}

func validStatus(s string) bool {
	for _, st := range executionStatuses {
		if string(st) == s {
			return true
		}
	}
	return false
}

// workflowIDs are the ids of the tenant's workflows, for the start form.
func (c *Console) workflowIDs(ctx context.Context, tenant string) ([]string, error) {
	return dbsqlc.New().ConsoleWorkflowIDs(ctx, c.pool, &dbsqlc.ConsoleWorkflowIDsParams{TenantID: tenant, Max: definitionsPerPage})
}

// executionView is what templates/execution.html shows.
type executionView struct {
	X          *engine.Execution
	Graph      template.HTML
	Events     []engine.LogEntry
	MoreEvents bool
	Tree       []treeRow
	Wait       *waitView
	// Jobs are the execution's River jobs, linked into River UI
	// (operators only).
	Jobs []jobLink
}

// treeRow is one execution of a tree, at its depth.
type treeRow struct {
	X       *dbsqlc.ConsoleFamilyRow
	Depth   int
	Current bool
}

// waitView is what a waiting execution waits for and how to end the
// wait from the page.
type waitView struct {
	For   string
	Until *time.Time
	Data  json.RawMessage
	// EventType resumes the wait (event.publish); empty for a wait no event
	// ends (a delay, a child run, an input).
	EventType   string
	EventSample string
	// Input is set when the execution waits for input (workflow.input).
	Input *inputView
}

// inputView is a request_input's form.
type inputView struct {
	RequestID string
	NodeID    string
	Prompt    string
	Options   []string
	Sample    string
}

// resumeEvents maps a wait to the event that resumes it and a sample of
// its data (docs/api.md, "Events: resume payloads").
var resumeEvents = map[string]struct{ eventType, sample string }{
	"response":  {"MESSAGE_RECEIVED", `{"text": ""}`},
	"document":  {"DOCUMENT_UPLOADED", `{"document_type": "INE", "url": "https://files.example/document.pdf"}`},
	"signature": {"SIGNATURE_COMPLETED", `{"signed_document_url": "https://files.example/signed.pdf", "signed_at": ""}`},
	"test":      {"TEST_COMPLETED", `{"score": 0, "result": ""}`},
	"event":     {"EVENT_COMPLETED", `{"event_id": ""}`},
}

// executionPage shows one execution: its graph, wait, variables, events,
// family and actions.
func (c *Console) executionPage(w http.ResponseWriter, r *http.Request, sess httpapi.Session) error {
	ctx := r.Context()
	x, err := c.engine.GetExecution(ctx, c.pool, sess.TenantID, r.PathValue("id"))
	if err != nil {
		return err
	}
	view := executionView{X: x, Wait: waitOf(x)}
	def, err := c.engine.GetDefinition(ctx, c.pool, sess.TenantID, x.WorkflowID, x.Version)
	if err != nil {
		return err
	}
	marks := GraphMarks{Visited: map[string]bool{}}
	for _, id := range x.NodePath {
		marks.Visited[id] = true
	}
	if x.CurrentNodeID != nil && !engine.IsTerminal(x.Status) {
		marks.Current = *x.CurrentNodeID
	}
	view.Graph = RenderGraph(def.Nodes, marks)
	if view.Events, err = c.engine.Logs(ctx, c.pool, sess.TenantID, x.ExecutionID, 0, eventsShown+1); err != nil {
		return err
	}
	if len(view.Events) > eventsShown {
		view.Events, view.MoreEvents = view.Events[:eventsShown], true
	}
	if view.Tree, err = c.tree(ctx, sess.TenantID, x); err != nil {
		return err
	}
	if c.isOperator(sess) {
		if view.Jobs, err = c.executionJobs(ctx, x); err != nil {
			return err
		}
	}
	return c.show(w, sess, page{Name: "execution", Title: "Execution " + x.ExecutionID,
		Stream: "execution_id=" + url.QueryEscape(x.ExecutionID), Data: view})
}

// waitOf describes a waiting execution's wait; nil when it does not wait.
func waitOf(x *engine.Execution) *waitView {
	if x.Status != engine.StatusWaiting || x.WaitingFor == nil {
		return nil
	}
	v := &waitView{For: *x.WaitingFor, Until: x.WaitingUntil, Data: x.WaitingData}
	if ev, ok := resumeEvents[v.For]; ok {
		v.EventType, v.EventSample = ev.eventType, ev.sample
	}
	if v.For == "input" {
		v.Input = inputOf(x)
	}
	return v
}

// inputOf reads a request_input's prompt and options from its wait.
func inputOf(x *engine.Execution) *inputView {
	var data struct {
		RequestID string `json:"request_id"`
		NodeID    string `json:"nodeId"`
		Prompt    string `json:"prompt"`
		Options   []any  `json:"options"`
		Default   any    `json:"default"`
	}
	_ = json.Unmarshal(x.WaitingData, &data)
	in := &inputView{RequestID: data.RequestID, NodeID: data.NodeID, Prompt: data.Prompt}
	answer := data.Default
	for _, o := range data.Options {
		b, _ := json.Marshal(o)
		in.Options = append(in.Options, string(b))
		if answer == nil {
			answer = o
		}
	}
	if answer == nil {
		answer = ""
	}
	sample, _ := json.Marshal(map[string]any{"response": answer})
	in.Sample = string(sample)
	return in
}

// tree is the execution's family: its root (up to treeDepth ancestors
// above it) and the root's descendants, depth first, at most treeRows, read
// in one query.
func (c *Console) tree(ctx context.Context, tenant string, x *engine.Execution) ([]treeRow, error) {
	rows, err := dbsqlc.New().ConsoleFamily(ctx, c.pool, &dbsqlc.ConsoleFamilyParams{
		ID: x.ID, TenantID: tenant, MaxUp: treeDepth, MaxDepth: treeDepth, Max: treeRows})
	if err != nil {
		return nil, err
	}
	out := make([]treeRow, len(rows))
	for i, r := range rows {
		out[i] = treeRow{X: r, Depth: int(r.Depth), Current: r.ExecutionID == x.ExecutionID}
	}
	return out, nil
}
