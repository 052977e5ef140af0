package benchkit

// Nodes is how many nodes one run of FiveNodeWorkflow visits.
const Nodes = 5

// FiveNodeWorkflow is the five-node bench workflow: start, set_variables,
// decision, send_message, end; with visits > 1 it visits all five. Its id
// is "bench".
const FiveNodeWorkflow = `{
  "workflow_id": "bench", "name": "Bench", "version": "1.0.0",
  "nodes": [
    {"id": "start", "type": "start", "next": "remember"},
    {"id": "remember", "type": "action", "actionType": "set_variables",
     "parameters": {"values": {"greeting": "Hola {{name}}"}}, "next": "check"},
    {"id": "check", "type": "decision", "condition": "${visits} > 1",
     "branches": {"true": "send", "false": "end"}},
    {"id": "send", "type": "action", "actionType": "send_message",
     "parameters": {"message": "{{greeting}}, qué gusto verte"}, "next": "end"},
    {"id": "end", "type": "end", "result": {"summary": "Saludo enviado a {{name}}"}}
  ]
}`

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
