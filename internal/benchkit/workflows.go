package benchkit

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Nodes is how many nodes one run of a five-node workflow visits when its
// decision takes the send branch.
const Nodes = 5

// FiveNode describes a five-node bench workflow: start, set_variables,
// decision, send_message, end.
type FiveNode struct {
	// ID is the workflow's id.
	ID string
	// Name is the variable the greeting, the message and the result name.
	Name string
	// Condition is the decision's: when it holds, the run sends its message
	// and visits all five nodes; otherwise it skips the send.
	Condition string
}

// JSON is the workflow's definition.
func (f FiveNode) JSON() string {
	q := func(s string) string {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(s) // a string always encodes
		return strings.TrimSuffix(b.String(), "\n")
	}
	return fmt.Sprintf(`{
  "workflow_id": %s, "name": "Bench", "version": "1.0.0",
  "nodes": [
    {"id": "start", "type": "start", "next": "remember"},
    {"id": "remember", "type": "action", "actionType": "set_variables",
     "parameters": {"values": {"greeting": %s}}, "next": "check"},
    {"id": "check", "type": "decision", "condition": %s,
     "branches": {"true": "send", "false": "end"}},
    {"id": "send", "type": "action", "actionType": "send_message",
     "parameters": {"message": "{{greeting}}, qué gusto verte"}, "next": "end"},
    {"id": "end", "type": "end", "result": {"summary": %s}}
  ]
}`, q(f.ID), q("Hola {{"+f.Name+"}}"), q(f.Condition), q("Saludo enviado a {{"+f.Name+"}}"))
}

// FiveNodeWorkflow is baton bench's five-node workflow, "bench": with
// FiveNodeInput it visits all five nodes.
var FiveNodeWorkflow = FiveNode{ID: "bench", Name: "name", Condition: "${visits} > 1"}.JSON()

// FiveNodeInput is the input of a FiveNodeWorkflow run that visits all
// five nodes.
func FiveNodeInput() map[string]any { return map[string]any{"name": "Ana", "visits": 2} }

// WaitWorkflow waits for an event, then runs two nodes and ends: the resume
// round trip is from the event's acceptance to the end. Its id is
// "bench-wait"; a run visits 4 nodes.
const WaitWorkflow = `{"workflow_id": "bench-wait", "version": "1", "nodes": [
  {"id": "start", "type": "start", "next": "wait"},
  {"id": "wait", "type": "action", "actionType": "wait_for_event", "parameters": {"event_id": "go", "timeout": "1h"}, "next": "note"},
  {"id": "note", "type": "action", "actionType": "set_variables", "parameters": {"values": {"resumed": true}}, "next": "end"},
  {"id": "end", "type": "end"}]}`

// WaitNodes is how many nodes a resumed WaitWorkflow run visits.
const WaitNodes = 4
