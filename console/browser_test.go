package console_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/httpapi"
	"github.com/batonrun/baton/internal/browsertest"
)

// The recruiting story's thread: Maria's WhatsApp.
const mariaThread = "whatsapp:+5215550001"

// signedIn starts a Chromium and signs it in with a token through the
// sign-in page.
func signedIn(t *testing.T, s *site, token string) *browsertest.Browser {
	t.Helper()
	b := browsertest.New(t)
	b.Timeout = 20 * time.Second
	b.Navigate(s.server.URL + "/console/executions")
	b.Run(
		browsertest.WaitText("h1", "Sign in"),
		chromedp.SetValue(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS("#signin")),
		browsertest.WaitText("h1", "Executions"),
	)
	return b
}

// location is the page's path.
func location(b *browsertest.Browser) string {
	return browsertest.Result(b, chromedp.Evaluate[string]("location.pathname"))
}

// TestRecruitingStoryInTheBrowser plays the recruiting story through the
// console in a real Chromium: the coordinator starts on Maria's thread, the
// collector it triggers inherits the thread's lock, an evaluator's messages
// wait in the queue, the INE is uploaded from the collector's page, and the
// thread's timeline, open in another browser, follows without a reload.
func TestRecruitingStoryInTheBrowser(t *testing.T) {
	s := newSite(t, siteOpts{jobs: true})
	tenant := newTenant()
	for _, f := range []string{"document-collector", "recruiting-coordinator", "evaluator"} {
		name := f
		if f == "recruiting-coordinator" {
			name = "coordinator"
		}
		raw, err := os.ReadFile(filepath.Join("..", "examples", name+".json"))
		require.NoError(t, err)
		s.define(t, tenant, string(raw))
	}
	token := s.token(t, tenant, httpapi.ScopeWorkflowsRead, httpapi.ScopeWorkflowsWrite, httpapi.ScopeMonitorRead,
		httpapi.ScopeMonitorWrite)

	// The operator's sign-in to River UI (an operator token, not the
	// tenant's), then the sign-in page, then the coordinator started on
	// Maria's thread from the executions page.
	a := browsertest.New(t)
	a.Timeout = 20 * time.Second
	a.Navigate(s.server.URL + "/console/jobs/signin?next=%2Fconsole%2Fsignin")
	a.Run(
		chromedp.SetValue(chromedp.CSS("#operator-token"), operatorToken(t)),
		chromedp.Click(chromedp.CSS("#operator-signin")),
		browsertest.WaitText("h1", "Sign in"),
	)
	a.Run(chromedp.SetValue(chromedp.CSS("#token"), token))
	a.Screenshot("signin")
	a.Run(
		chromedp.Click(chromedp.CSS("#signin")),
		browsertest.WaitText("h1", "Executions"),
		chromedp.SetValue(chromedp.CSS("#start-workflow"), "recruiting-coordinator"),
		chromedp.SetValue(chromedp.CSS("#start-thread"), mariaThread),
		chromedp.SetValue(chromedp.CSS("#start-input"), `{"name": "Maria"}`),
		chromedp.Click(chromedp.CSS("#start")),
		browsertest.WaitText("h1", "Execution exec-"),
		browsertest.WaitText("#waiting-for", "agent"),
		browsertest.WaitText("#tree", "document-collector"),
	)
	coordinator := strings.TrimPrefix(location(a), "/console/executions/")

	// The collector waits for the INE, holding the lock it inherited.
	a.Run(
		chromedp.Click(chromedp.CSS("#tree li.depth-1 a")),
		browsertest.WaitText("#waiting-for", "document"),
	)
	collector := strings.TrimPrefix(location(a), "/console/executions/")
	require.NotEqual(t, coordinator, collector)
	a.Run(browsertest.WaitText("#jobs", "execution.step")) // an operator's links into River UI
	a.Screenshot("execution")
	a.Run(
		chromedp.Click(chromedp.CSS("#thread-link")),
		browsertest.WaitText("h1", "Thread "+mariaThread),
		browsertest.WaitText("#lock-holder", collector),
		browsertest.WaitText("#timeline", "Hola Maria, iniciamos tu proceso"),
	)
	browsertest.Result(a, chromedp.Evaluate[string](`document.body.dataset.marker = "never reloaded"`))

	// An independent evaluator starts on the same thread from a second
	// browser: its messages wait in the queue, and the first browser sees
	// them arrive without a reload.
	b := signedIn(t, s, token)
	b.Run(
		chromedp.SetValue(chromedp.CSS("#start-workflow"), "evaluator"),
		chromedp.SetValue(chromedp.CSS("#start-thread"), mariaThread),
		chromedp.Click(chromedp.CSS("#start")),
		browsertest.WaitText("#waiting-for", "response"),
	)
	evaluator := strings.TrimPrefix(location(b), "/console/executions/")
	a.Run(
		browsertest.WaitText("#queued", "Tienes una evaluacion pendiente"),
		browsertest.WaitText("#queued", "El test tiene 30 preguntas"),
		browsertest.WaitText("#queued-count", "2"),
	)
	a.Screenshot("thread-queued")

	// Maria's INE is uploaded from the collector's page.
	b.Navigate(s.server.URL + "/console/executions/" + collector)
	b.Run(
		chromedp.WaitVisible(chromedp.CSS("#publish")),
		chromedp.Click(chromedp.CSS("#publish")),
		browsertest.WaitText("#flash", "event.publish"),
		browsertest.WaitText("#status", "completed"),
	)

	// The thread's timeline follows, in order, without a reload: the
	// collector thanks her, the coordinator goes on, and the evaluator's
	// queued messages go out once the lock is handed to it.
	a.Run(
		browsertest.WaitText("#timeline", "Documento recibido"),
		browsertest.WaitText("#timeline", "Siguiente paso"),
		browsertest.WaitText("#timeline", "El test tiene 30 preguntas"),
		browsertest.WaitText("#lock-holder", evaluator),
		browsertest.WaitText("#queued", "Nothing is queued"),
		browsertest.WaitText("#timeline", "queued for the lock, held"),
	)
	require.Equal(t, "never reloaded", browsertest.Result(a, chromedp.Evaluate[string](`document.body.dataset.marker`)))
	timeline := a.Text("#timeline")
	order := []string{"Hola Maria", "Necesito tu", "Documento recibido", "Siguiente paso", "Tienes una evaluacion pendiente", "El test tiene 30 preguntas"}
	last := -1
	for _, m := range order {
		i := strings.Index(timeline, m)
		require.Greater(t, i, last, "%q comes after the messages before it in:\n%s", m, timeline)
		last = i
	}
	a.Screenshot("thread")

	// Maria answers the evaluator from the thread page, after the thread's
	// queue mode is set to followup there.
	a.Run(
		chromedp.SetValue(chromedp.CSS("#queue-mode"), "followup"),
		chromedp.Click(chromedp.CSS("#set-queue")),
		browsertest.WaitText("#queue-value-mode", "followup"),
		browsertest.WaitText("#queue", "session"),
		chromedp.SetValue(chromedp.CSS("#inbound-text"), "Sí, hoy puedo"),
		chromedp.Click(chromedp.CSS("#send-inbound")),
		browsertest.WaitText("#timeline", "Sí, hoy puedo"),
	)
	b.Navigate(s.server.URL + "/console/executions/" + evaluator)
	b.Run(browsertest.WaitText("#waiting-for", "test"))

	// The final execution tree, from the coordinator's page.
	a.Navigate(s.server.URL + "/console/executions/" + coordinator)
	a.Run(
		browsertest.WaitText("#status", "completed"),
		browsertest.WaitText("#tree li.depth-0", "completed"),
		browsertest.WaitText("#tree li.depth-1", "completed"),
	)
	a.Screenshot("tree")

	// The other pages, each as a person opens it.
	a.Navigate(s.server.URL + "/console/executions")
	a.Run(browsertest.WaitText("#executions", evaluator))
	a.Screenshot("executions")
	a.Navigate(s.server.URL + "/console/lanes")
	a.Run(browsertest.WaitText("#lanes", "main"))
	a.Screenshot("lanes")
	a.Navigate(s.server.URL + "/console/monitor")
	a.Run(browsertest.WaitText("#waiting", evaluator))
	a.Screenshot("monitor")
	a.Navigate(s.server.URL + "/console/definitions/recruiting-coordinator")
	a.Run(browsertest.WaitText("h1", "recruiting-coordinator"))
	a.Screenshot("definition")
	a.Navigate(s.server.URL + "/console/definitions")
	a.Run(
		chromedp.SetValue(chromedp.CSS("#definition-source"), `{"workflow_id": "broken", "version": "1", "nodes": [
  {"id": "start", "type": "start", "next": "ask"},
  {"id": "ask", "type": "action", "actionType": "send_message", "parameters": {}, "next": "nowhere"},
  {"id": "end", "type": "end"}]}`),
		chromedp.Click(chromedp.CSS("#validate-button")),
		browsertest.WaitText("#problems", "nowhere"),
	)
	a.Screenshot("definitions")

	// River UI, for this operator, lists Baton's job kinds.
	a.Navigate(s.server.URL + "/console/jobs/jobs?state=completed")
	a.Run(browsertest.WaitText("body", "execution.step"))
	a.Screenshot("jobs")
}

// TestReadOnlyTokenIsRefusedAnAction signs in with a read-only token and
// tries to cancel a run: the API refuses, and the page says why.
func TestReadOnlyTokenIsRefusedAnAction(t *testing.T) {
	s := newSite(t, siteOpts{})
	tenant := newTenant()
	s.define(t, tenant, waitWorkflow)
	id := s.start(t, startParams(tenant))
	b := signedIn(t, s, s.token(t, tenant, httpapi.ScopeWorkflowsRead))
	// The refused request is the browser's one expected error.
	b.AllowErrors("403")
	b.Navigate(s.server.URL + "/console/executions/" + id)
	b.Run(
		chromedp.SetValue(chromedp.CSS("#cancel-reason"), "not mine to cancel"),
		chromedp.Click(chromedp.CSS("#cancel")),
		browsertest.WaitText("#flash", "lacks the workflows:write scope"),
		browsertest.WaitText("#status", "waiting"),
	)
	b.Screenshot("forbidden")
	// A page the session's scopes do not open says which scope it needs.
	b.Run(chromedp.Navigate(s.server.URL+"/console/lanes"), browsertest.WaitText("#error-message", "monitor:read"))
}

// TestExecutionsPageFollowsTheStream keeps the executions page open while
// runs start and end elsewhere: the list follows without a reload.
func TestExecutionsPageFollowsTheStream(t *testing.T) {
	s := newSite(t, siteOpts{})
	tenant := newTenant()
	s.define(t, tenant, waitWorkflow)
	b := signedIn(t, s, s.token(t, tenant))
	browsertest.Result(b, chromedp.Evaluate[string](`document.body.dataset.marker = "never reloaded"`))
	b.Run(
		browsertest.WaitText("#executions", "No executions match"),
		chromedp.WaitReady(chromedp.CSS(`body[data-live="on"]`)),
	)

	id := s.start(t, startParams(tenant))
	b.Run(
		browsertest.WaitText("#executions", id),
		browsertest.WaitText("#executions tr[data-execution] .status", "waiting"),
	)
	_, err := s.engine.PublishEvent(context.Background(), engine.PublishEventParams{TenantID: tenant, EventType: "DOCUMENT_UPLOADED",
		EventID: "ine-1", ExecutionID: id, Data: map[string]any{"document_type": "INE", "url": "https://files.example/ine.pdf"}})
	require.NoError(t, err)
	b.Run(browsertest.WaitText("#executions tr[data-execution] .status", "completed"))
	require.Equal(t, "never reloaded", browsertest.Result(b, chromedp.Evaluate[string](`document.body.dataset.marker`)))
}

// TestActionsFromTheExecutionPage answers a request_input from its form,
// restarts the run, and cleans up locks from the monitor.
func TestActionsFromTheExecutionPage(t *testing.T) {
	s := newSite(t, siteOpts{})
	tenant := newTenant()
	s.define(t, tenant, `{"workflow_id": "ask", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "confirm"},
	  {"id": "confirm", "type": "action", "actionType": "request_input",
	   "parameters": {"prompt": "¿Desea continuar?", "input_type": "choice", "options": ["sí", "no"], "timeout": "5m"}, "next": "end"},
	  {"id": "end", "type": "end", "result": {"summary": "{{response}}"}}]}`)
	id := s.start(t, engine.StartParams{TenantID: tenant, WorkflowID: "ask"})
	b := signedIn(t, s, s.token(t, tenant, httpapi.ScopeWorkflowsRead, httpapi.ScopeWorkflowsWrite, httpapi.ScopeMonitorRead, httpapi.ScopeMonitorWrite))
	b.Navigate(s.server.URL + "/console/executions/" + id)
	b.Run(
		browsertest.WaitText("#waiting-for", "input"),
		browsertest.WaitText("#input-form", "¿Desea continuar?"),
		browsertest.WaitText("#input-form", `"no"`),
		chromedp.SetValue(chromedp.CSS("#input-data"), `{"response": "no"}`),
		chromedp.Click(chromedp.CSS("#provide-input")),
		browsertest.WaitText("#status", "completed"),
		browsertest.WaitText("#result-summary", "no"),
	)

	b.Run(
		chromedp.Click(chromedp.CSS("#restart")),
		browsertest.WaitText("#head", "Restarted from"),
		browsertest.WaitText("#waiting-for", "input"),
	)
	require.NotEqual(t, "/console/executions/"+id, location(b))

	b.Navigate(s.server.URL + "/console/monitor")
	b.Run(
		chromedp.Click(chromedp.CSS("#cleanup")),
		browsertest.WaitText("#flash", "monitor.cleanup: done"),
	)
}
