package main

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/titanous/json5"

	"github.com/batonrun/baton/config"
)

const (
	// examplesDir holds the example workflows and their configuration.
	examplesDir = "../../examples"
	// exampleTenant is the tenant the examples run as.
	exampleTenant = "examples"
)

// TestExamplesRun stores every workflow of examples/ through the API of a
// `baton serve` configured with examples/baton.json5, and drives each one
// to its end as a client would: it starts it, answers where it waits and
// reads what it said. An httptest server stands for the document service
// the configuration's document_processor tool calls.
func TestExamplesRun(t *testing.T) {
	t.Parallel()
	docs := newDocumentService(t)
	env, _, _ := serveDatabase(t, exampleConfig(t, docs.URL))
	s := startServer(t, env)

	runs := map[string]func(t *testing.T){
		"coordinator.json":        func(t *testing.T) { runCoordinator(t, s) },
		"document-collector.json": func(t *testing.T) { runDocumentCollector(t, s) },
		"document-processor.json": func(t *testing.T) { runDocumentProcessor(t, s, docs) },
		"evaluator.json":          func(t *testing.T) { runEvaluator(t, s) },
	}
	files, err := filepath.Glob(filepath.Join(examplesDir, "*.json"))
	require.NoError(t, err)
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
		storeExample(t, s, f)
	}
	require.ElementsMatch(t, slices.Collect(maps.Keys(runs)), names, "each workflow of examples/ has its run here")
	for _, name := range slices.Sorted(maps.Keys(runs)) {
		t.Run(name, runs[name])
	}
}

// exampleConfig checks that examples/baton.json5 loads as shipped and
// returns it with its document_processor tool pointed at toolURL.
func exampleConfig(t *testing.T, toolURL string) string {
	t.Helper()
	path := filepath.Join(examplesDir, "baton.json5")
	_, err := config.Load(path)
	require.NoError(t, err, "the shipped configuration loads as it is")
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var file map[string]any
	require.NoError(t, json5.Unmarshal(raw, &file))
	tool, ok := file["tools"].(map[string]any)["document_processor"].(map[string]any)
	require.True(t, ok, "examples/baton.json5 defines no tools.document_processor")
	tool["url"] = toolURL
	out, err := json.Marshal(file)
	require.NoError(t, err)
	return string(out)
}

// storeExample validates the definition in file, then stores it.
func storeExample(t *testing.T, s *server, file string) {
	t.Helper()
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	var definition map[string]any
	require.NoError(t, json.Unmarshal(raw, &definition))
	status, body := s.postAs(t, exampleTenant, "/api/v1/workflow/validate", definition)
	require.Equal(t, http.StatusOK, status, "%s: %s", file, body)
	require.Equal(t, true, answerData(t, body)["valid"], "%s: %s", file, body)
	status, body = s.postAs(t, exampleTenant, "/api/v1/workflow/definitions", definition)
	require.Equal(t, http.StatusCreated, status, "%s: %s", file, body)
}

// documentService is the document service of examples/baton.json5: it
// records each call and detects Spanish in documents under /es/.
type documentService struct {
	*httptest.Server
	mu    sync.Mutex
	calls []map[string]any
}

func newDocumentService(t *testing.T) *documentService {
	d := &documentService{}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var call map[string]any
		if err := json.NewDecoder(r.Body).Decode(&call); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		d.mu.Lock()
		d.calls = append(d.calls, call)
		d.mu.Unlock()
		inputs, _ := call["inputs"].(map[string]any)
		url, _ := inputs["document_url"].(string)
		language := "en"
		if strings.Contains(url, "/es/") {
			language = "es"
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"language": language, "pages": 3})
	}))
	t.Cleanup(d.Close)
	return d
}

// callsFor returns the calls made for the execution.
func (d *documentService) callsFor(executionID string) []map[string]any {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []map[string]any
	for _, c := range d.calls {
		if c["execution_id"] == executionID {
			out = append(out, c)
		}
	}
	return out
}

// The document processor calls its tool, takes the branch of the language
// the tool detected, and ends once asked for the output format.
func runDocumentProcessor(t *testing.T, s *server, docs *documentService) {
	for _, tc := range []struct{ url, branch, language string }{
		{"https://files.example/es/contrato.pdf", "spanish_processing", "es"},
		{"https://files.example/en/contract.pdf", "other_language_processing", "en"},
	} {
		id := startExample(t, s, map[string]any{"workflow_id": "document-processor-workflow", "input": map[string]any{"document_url": tc.url}})
		x := waitExecution(t, s, id, waitsFor("input"))
		require.Equal(t, "confirm", x["current_step"].(map[string]any)["step_id"])
		require.Equal(t, "select", x["waiting"].(map[string]any)["waiting_data"].(map[string]any)["input_type"], "%v", x)

		status, body := s.postAs(t, exampleTenant, "/api/v1/workflow/executions/"+id+"/input",
			map[string]any{"node_id": "confirm", "input_data": map[string]any{"format": "pdf"}})
		require.Equal(t, http.StatusAccepted, status, "%s", body)
		done := waitExecution(t, s, id, terminalExecution)
		require.Equal(t, "completed", done["status"], "%v", done)
		require.Equal(t, []any{"start", "document_processing", "language_detection", tc.branch, "confirm", "end"}, done["node_path"])
		vars := done["variables"].(map[string]any)
		require.Equal(t, tc.language, vars["summary_language"])
		require.Equal(t, "pdf", vars["format"])

		calls := docs.callsFor(id)
		require.Len(t, calls, 1)
		require.Equal(t, "document_processor", calls[0]["tool_id"])
		require.Equal(t, map[string]any{"extraction_level": "full"}, calls[0]["config"])
		require.Equal(t, map[string]any{"document_url": tc.url}, calls[0]["inputs"])
	}
}

// The document collector asks for the INE, takes its upload and thanks.
func runDocumentCollector(t *testing.T, s *server) {
	id := startExample(t, s, map[string]any{"workflow_id": "document-collector", "thread_id": "collector-ana", "input": map[string]any{"documents": []string{"INE"}}})
	waitExecution(t, s, id, waitsFor("document"))
	publishExample(t, s, id, "DOCUMENT_UPLOADED", map[string]any{"document_type": "INE", "url": "https://files.example/ana-ine.pdf"})
	done := waitExecution(t, s, id, terminalExecution)
	require.Equal(t, "completed", done["status"], "%v", done)
	require.Equal(t, []any{"start", "ask", "wait", "thanks", "end"}, done["node_path"])
	require.Equal(t, []any{"https://files.example/ana-ine.pdf"}, done["variables"].(map[string]any)["documentUrls"])
	require.Equal(t, []string{"Necesito tu INE", "Documento recibido"}, deliveredTexts(t, s, "collector-ana", 2))
}

// The coordinator greets, runs the document collector as its child on the
// same thread and waits for it, then says what comes next.
func runCoordinator(t *testing.T, s *server) {
	id := startExample(t, s, map[string]any{"workflow_id": "recruiting-coordinator", "thread_id": "maria", "input": map[string]any{"name": "Maria"}})
	x := waitExecution(t, s, id, waitsFor("agent"))
	child := x["variables"].(map[string]any)["triggeredExecutionId"].(string)
	c := waitExecution(t, s, child, waitsFor("document"))
	require.Equal(t, id, c["parent_execution_id"])
	require.Equal(t, "subagent", c["lane"])
	publishExample(t, s, child, "DOCUMENT_UPLOADED", map[string]any{"document_type": "INE", "url": "https://files.example/maria-ine.pdf"})

	done := waitExecution(t, s, id, terminalExecution)
	require.Equal(t, "completed", done["status"], "%v", done)
	require.Equal(t, []any{"start", "greet", "collect", "check", "next_step", "end"}, done["node_path"])
	require.Equal(t, true, done["variables"].(map[string]any)["childExecutionSuccess"])
	require.Equal(t, []string{
		"Hola Maria, iniciamos tu proceso",
		"Necesito tu INE",
		"Documento recibido",
		"Siguiente paso: te enviaremos una evaluacion",
	}, deliveredTexts(t, s, "maria", 4))
}

// The evaluator asks, takes the candidate's answer from the thread, assigns
// the test (Baton tells the candidate) and reports its result.
func runEvaluator(t *testing.T, s *server) {
	id := startExample(t, s, map[string]any{"workflow_id": "evaluator", "thread_id": "luis"})
	waitExecution(t, s, id, waitsFor("response"))
	status, body := s.postAs(t, exampleTenant, "/api/v1/threads/luis/messages", map[string]any{"text": "Sí, hoy puedo"})
	require.Equal(t, http.StatusAccepted, status, "%s", body)
	require.Equal(t, "resumed", answerData(t, body)["outcome"], "%s", body)
	waitExecution(t, s, id, waitsFor("test"))
	publishExample(t, s, id, "TEST_COMPLETED", map[string]any{"score": 87, "result": "aprobado"})

	done := waitExecution(t, s, id, terminalExecution)
	require.Equal(t, "completed", done["status"], "%v", done)
	require.Equal(t, []any{"start", "announce", "ask", "wait", "answered", "assign", "score", "end"}, done["node_path"])
	require.Equal(t, "Sí, hoy puedo", done["variables"].(map[string]any)["lastResponse"])
	require.Equal(t, []string{
		"Tienes una evaluacion pendiente",
		"El test tiene 30 preguntas. ¿Puedes hacerlo hoy?",
		"Te asignamos la evaluación psicometrico-30. Complétala cuando puedas.",
		"Gracias, tu resultado: aprobado (87)",
	}, deliveredTexts(t, s, "luis", 4))
}

// startExample starts an execution and returns its id.
func startExample(t *testing.T, s *server, payload map[string]any) string {
	t.Helper()
	status, body := s.postAs(t, exampleTenant, "/api/v1/workflow/execute", payload)
	require.Equal(t, http.StatusAccepted, status, "%s", body)
	id, _ := answerData(t, body)["execution_id"].(string)
	require.NotEmpty(t, id, "%s", body)
	return id
}

// publishExample publishes an event to the execution and checks that it
// resumed it.
func publishExample(t *testing.T, s *server, executionID, eventType string, data map[string]any) {
	t.Helper()
	status, body := s.postAs(t, exampleTenant, "/api/v1/events", map[string]any{
		"event_type": eventType, "event_id": eventType + "-" + executionID, "execution_id": executionID, "data": data})
	require.Equal(t, http.StatusAccepted, status, "%s", body)
	require.Equal(t, []any{executionID}, answerData(t, body)["resumed"], "%s", body)
}

// waitExecution polls the execution until done holds and returns it.
func waitExecution(t *testing.T, s *server, executionID string, done func(x map[string]any) bool) map[string]any {
	t.Helper()
	var x map[string]any
	require.Eventually(t, func() bool {
		status, body := s.get(t, exampleTenant, "/api/v1/workflow/executions/"+executionID)
		x, _ = body["data"].(map[string]any)
		return status == http.StatusOK && done(x)
	}, 30*time.Second, 25*time.Millisecond, "execution %s: %v", executionID, x)
	return x
}

// waitsFor holds when the execution waits for what.
func waitsFor(what string) func(x map[string]any) bool {
	return func(x map[string]any) bool {
		w, _ := x["waiting"].(map[string]any)
		return x["status"] == "waiting" && w["waiting_for"] == what
	}
}

func terminalExecution(x map[string]any) bool {
	switch x["status"] {
	case "completed", "failed", "timeout", "cancelled":
		return true
	}
	return false
}

// deliveredTexts waits until the thread's n outbound messages are delivered
// and returns their texts in order.
func deliveredTexts(t *testing.T, s *server, thread string, n int) []string {
	t.Helper()
	var texts []string
	require.Eventually(t, func() bool {
		status, body := s.get(t, exampleTenant, "/api/v1/threads/"+thread+"/messages?direction=out")
		data, _ := body["data"].(map[string]any)
		items, _ := data["items"].([]any)
		texts = texts[:0]
		for _, item := range items {
			m, _ := item.(map[string]any)
			text, _ := m["text"].(string)
			if m["status"] != "delivered" {
				return false
			}
			texts = append(texts, text)
		}
		return status == http.StatusOK && len(texts) >= n
	}, 30*time.Second, 25*time.Millisecond, "thread %s: %v", thread, texts)
	return texts
}

// answerData returns the data object of a success envelope.
func answerData(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var envelope struct {
		Data map[string]any `json:"data"`
	}
	require.NoError(t, json.Unmarshal(body, &envelope), "%s", body)
	return envelope.Data
}
