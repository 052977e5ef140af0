package workflow

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"
)

// Node types of a workflow definition.
const (
	NodeStart    = "start"
	NodeEnd      = "end"
	NodeDecision = "decision"
	NodeTask     = "task"
	NodeAction   = "action"
)

// Action types of an action node.
const (
	ActionSendMessage      = "send_message"
	ActionSetVariables     = "set_variables"
	ActionWaitForResponse  = "wait_for_response"
	ActionTriggerAgent     = "trigger_agent"
	ActionRequestDocument  = "request_document"
	ActionRequestSignature = "request_signature"
	ActionAssignTest       = "assign_test"
	ActionWaitForEvent     = "wait_for_event"
	ActionDelay            = "delay"
	ActionRequestInput     = "request_input"
)

// WaitKind describes one kind of wait: what it waits for and its timeout
// bounds.
type WaitKind struct {
	// WaitingFor is the value of waiting_for while the execution waits.
	WaitingFor string
	// Default is the timeout used when the node sets none; zero means the
	// node must set one.
	Default time.Duration
	// Max is the longest timeout a node may ask for.
	Max time.Duration
}

const day = 24 * time.Hour

// waitKinds maps each waiting action type to its wait.
var waitKinds = map[string]WaitKind{
	ActionWaitForResponse:  {WaitingFor: "response", Default: day, Max: 7 * day},
	ActionTriggerAgent:     {WaitingFor: "agent", Default: time.Hour, Max: day},
	ActionRequestDocument:  {WaitingFor: "document", Default: 7 * day, Max: 30 * day},
	ActionRequestSignature: {WaitingFor: "signature", Default: 7 * day, Max: 30 * day},
	ActionAssignTest:       {WaitingFor: "test", Default: 7 * day, Max: 30 * day},
	ActionWaitForEvent:     {WaitingFor: "event", Default: 7 * day, Max: 30 * day},
	ActionDelay:            {WaitingFor: "delay", Max: 30 * day},
	ActionRequestInput:     {WaitingFor: "input", Default: 5 * time.Minute, Max: 7 * day},
}

// WaitKindOf returns the wait an action type starts, if it starts one.
func WaitKindOf(actionType string) (WaitKind, bool) {
	k, ok := waitKinds[actionType]
	return k, ok
}

// knownActions lists every action type a definition may use.
var knownActions = map[string]bool{
	ActionSendMessage: true, ActionSetVariables: true, ActionWaitForResponse: true,
	ActionTriggerAgent: true, ActionRequestDocument: true, ActionRequestSignature: true,
	ActionAssignTest: true, ActionWaitForEvent: true, ActionDelay: true, ActionRequestInput: true,
}

// Definition is a stored workflow: a graph of nodes (docs/api.md,
// "Definition").
type Definition struct {
	// WorkflowID names the workflow within its tenant.
	WorkflowID string `json:"workflow_id"`
	// Name is a human-readable name.
	Name string `json:"name,omitempty"`
	// Version identifies this immutable version of the workflow.
	Version string `json:"version"`
	// Description says what the workflow does.
	Description string `json:"description,omitempty"`
	// Lane is the lane executions of this workflow run in when the request
	// names none; empty means "main" for API-started runs.
	Lane string `json:"lane,omitempty"`
	// DefaultTimeoutMS bounds a task's tool call when the node sets no
	// timeout; nil means 30 seconds.
	DefaultTimeoutMS *int64 `json:"default_timeout_ms,omitempty"`
	// Nodes are the workflow's nodes.
	Nodes []*Node `json:"nodes"`

	byID map[string]*Node
	// remaining is the number of nodes on the shortest path from each node
	// to an end node, that node and the end included.
	remaining map[string]int
	// settle is, for each node, the most nodes a step starting there can
	// run before the execution ends or waits, or 0 when that step can stop
	// while the execution is still running (a task on some path, or a loop).
	settle map[string]int
	// sends says some node is a send_message action.
	sends bool
}

// Node is one node of a workflow definition.
type Node struct {
	ID          string `json:"id"`
	Type        string `json:"type"`
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	Next        string `json:"next,omitempty"`

	// Condition and Branches belong to decision nodes.
	Condition string            `json:"condition,omitempty"`
	Branches  map[string]string `json:"branches,omitempty"`

	// Task, Config, Inputs, Output, Retry and TimeoutMS belong to task nodes.
	Task      string         `json:"task,omitempty"`
	Config    map[string]any `json:"config,omitempty"`
	Inputs    map[string]any `json:"inputs,omitempty"`
	Output    string         `json:"output,omitempty"`
	Retry     *RetryPolicy   `json:"retry,omitempty"`
	TimeoutMS *int64         `json:"timeout_ms,omitempty"`

	// ActionType and Parameters belong to action nodes.
	ActionType string         `json:"actionType,omitempty"`
	Parameters map[string]any `json:"parameters,omitempty"`

	// Result belongs to end nodes: the execution's result, templated.
	Result map[string]any `json:"result,omitempty"`

	condition *condition
}

// RetryPolicy is a task node's (or a tool's) retry policy for retryable
// failures: timeouts, 5xx answers, unreachable tools and Go tools' errors.
// 4xx answers and validation errors are never retried.
type RetryPolicy struct {
	// Max is the number of retries after the first attempt.
	Max int `json:"max"`
	// Backoff is "exponential" (the default) or "linear".
	Backoff string `json:"backoff,omitempty"`
	// DelayMS is the first retry's delay: exponential doubles it on every
	// retry, linear adds it. Zero means 500 ms.
	DelayMS int64 `json:"delay_ms,omitempty"`
}

// EvalCondition evaluates a decision node's condition against the
// variables, within limits.conditionCost; ctx ending stops it.
func (n *Node) EvalCondition(ctx context.Context, vars Variables) (any, error) {
	if n.condition == nil {
		return nil, fmt.Errorf("decision %s has no valid condition", n.ID)
	}
	return n.condition.eval(ctx, vars)
}

// Node returns the node with the given id, or nil.
func (d *Definition) Node(id string) *Node { return d.byID[id] }

// Start returns the start node.
func (d *Definition) Start() *Node {
	for _, n := range d.Nodes {
		if n.Type == NodeStart {
			return n
		}
	}
	return nil
}

// FirstStepSettles reports whether the first step, from the start node, ends
// the execution or makes it wait within at most limit nodes on every path:
// it calls no tool and cannot stop while running.
func (d *Definition) FirstStepSettles(limit int) bool {
	start := d.Start()
	return start != nil && d.StepSettlesFrom(start.ID, limit)
}

// StepSettlesFrom reports whether a step starting at the node ends the
// execution or makes it wait within at most limit nodes on every path.
func (d *Definition) StepSettlesFrom(id string, limit int) bool {
	b := d.settle[id]
	return b > 0 && b <= limit
}

// SendsMessages reports whether some node of the definition is a
// send_message action.
func (d *Definition) SendsMessages() bool { return d.sends }

// Remaining returns the number of nodes on the shortest path from the node
// to an end node, both included; 0 for an unknown id.
func (d *Definition) Remaining(id string) int { return d.remaining[id] }

// successors returns the ids a node may go to next.
func (n *Node) successors() []string {
	var out []string
	if n.Next != "" {
		out = append(out, n.Next)
	}
	for _, k := range slices.Sorted(maps.Keys(n.Branches)) {
		out = append(out, n.Branches[k])
	}
	return out
}

// Waits reports whether executing the node commits a wait.
func (n *Node) Waits() bool {
	if n.Type != NodeAction {
		return false
	}
	if n.ActionType == ActionTriggerAgent {
		wait, _ := n.Parameters["waitForCompletion"].(bool)
		return wait
	}
	_, ok := waitKinds[n.ActionType]
	return ok
}

// ParseDefinition decodes a definition strictly: unknown fields are
// problems, reported with the node they are in.
func ParseDefinition(raw []byte) (*Definition, error) {
	var top struct {
		WorkflowID       string            `json:"workflow_id"`
		Name             string            `json:"name"`
		Version          string            `json:"version"`
		Description      string            `json:"description"`
		Lane             string            `json:"lane"`
		DefaultTimeoutMS *int64            `json:"default_timeout_ms"`
		Nodes            []json.RawMessage `json:"nodes"`
	}
	if err := strictDecode(raw, &top); err != nil {
		return nil, &ValidationError{Problems: []Problem{{Field: "payload", Message: err.Error()}}}
	}
	def := &Definition{
		WorkflowID: top.WorkflowID, Name: top.Name, Version: top.Version,
		Description: top.Description, Lane: top.Lane, DefaultTimeoutMS: top.DefaultTimeoutMS,
	}
	var problems []Problem
	for i, rawNode := range top.Nodes {
		node := &Node{}
		if err := strictDecode(rawNode, node); err != nil {
			var peek struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(rawNode, &peek)
			problems = append(problems, Problem{NodeID: peek.ID, Field: fmt.Sprintf("nodes[%d]", i), Message: err.Error()})
			continue
		}
		def.Nodes = append(def.Nodes, node)
	}
	if len(problems) > 0 {
		return nil, &ValidationError{Problems: problems}
	}
	return def, nil
}

func strictDecode(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	// dec.More would let a stray ] or } through.
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("unexpected data after the JSON value")
	}
	return nil
}

// Index builds the lookup tables of a definition: Validate calls it, and a
// stored definition read back calls it even when a tool it names is gone.
// It takes time linear in the nodes and edges.
func (d *Definition) Index() {
	d.byID = make(map[string]*Node, len(d.Nodes))
	d.sends = false
	for _, n := range d.Nodes {
		d.byID[n.ID] = n
		d.sends = d.sends || (n.Type == NodeAction && n.ActionType == ActionSendMessage)
	}
	d.remaining = d.shortestToEnd()
	d.settle = make(map[string]int, len(d.Nodes))
	onPath := map[string]bool{}
	for _, n := range d.Nodes {
		d.settleBound(n.ID, onPath, d.settle)
	}
}

// shortestToEnd counts, for each node that can reach an end node, the
// nodes on its shortest path there: a breadth-first search from the end
// nodes along reversed edges.
func (d *Definition) shortestToEnd() map[string]int {
	preds := make(map[string][]string, len(d.Nodes))
	remaining := make(map[string]int, len(d.Nodes))
	var queue []string
	for _, n := range d.Nodes {
		for _, s := range n.successors() {
			preds[s] = append(preds[s], n.ID)
		}
		if n.Type == NodeEnd {
			if _, dup := remaining[n.ID]; !dup {
				remaining[n.ID] = 1
				queue = append(queue, n.ID)
			}
		}
	}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		for _, p := range preds[id] {
			if _, seen := remaining[p]; !seen {
				remaining[p] = remaining[id] + 1
				queue = append(queue, p)
			}
		}
	}
	return remaining
}

// settleBound is the most nodes a step starting at id runs before the
// execution ends or waits, or 0 when it can stop while running — a task
// (its tool is called by a later step) or a loop (MaxNodesPerStep) — or
// when it starts a child (trigger_agent): the child's admission, in the same
// transaction, would count the parent as running and could leave the child
// pending with nobody to free the slot it counted. A missing node counts 1:
// the step fails there. Results are kept in done: a
// loop reachable from the start makes the whole answer 0 wherever it is
// met, so a node's bound does not depend on the path to it.
func (d *Definition) settleBound(id string, onPath map[string]bool, done map[string]int) int {
	if b, ok := done[id]; ok {
		return b
	}
	n := d.byID[id]
	switch {
	case n == nil, n.Type == NodeEnd:
		return 1
	case n.Type == NodeTask, n.ActionType == ActionTriggerAgent, onPath[id]:
		return 0
	case n.Waits():
		return 1
	}
	succ := n.successors()
	if len(succ) == 0 {
		return 0
	}
	onPath[id] = true
	defer delete(onPath, id)
	most := 0
	for _, s := range succ {
		b := d.settleBound(s, onPath, done)
		if b == 0 {
			// Kept too, or a graph of decisions would be walked once per
			// path: the answer is 0 wherever a 0 is met.
			done[id] = 0
			return 0
		}
		most = max(most, b)
	}
	done[id] = most + 1
	return most + 1
}
