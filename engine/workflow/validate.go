package workflow

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// ToolChecker tells validation whether a task's tool exists.
type ToolChecker interface {
	// HasTool reports whether a tool with this name is registered.
	HasTool(name string) bool
}

// Validate checks every rule of docs/workflow-language.md and returns a
// *ValidationError listing each problem with its node and field, or nil.
// A valid definition is indexed and ready to run.
// Every size and cost is checked against limits (zero fields take their
// defaults), so validation takes time linear in the definition's size.
func (d *Definition) Validate(tools ToolChecker, limits Limits) error {
	v := &validator{def: d, tools: tools, limits: limits.WithDefaults()}
	v.run()
	if len(v.problems) > 0 {
		return &ValidationError{Problems: v.problems}
	}
	d.Index()
	return nil
}

// Bounds of a task's retry policy and tool timeout. A call runs at most
// engine.MaxToolTimeout whatever the timeout says; the bound keeps the
// arithmetic on it from overflowing.
const (
	maxRetries       = 100
	maxRetryDelayMS  = 300_000
	maxToolTimeoutMS = 86_400_000
	// maxTimeoutActions bounds a wait's timeoutActions: each renders within
	// limits.renderBytes of its own.
	maxTimeoutActions = 10
)

type validator struct {
	def      *Definition
	tools    ToolChecker
	limits   Limits
	problems []Problem
	ids      map[string]*Node
}

// id checks an id or name against limits.idBytes.
func (v *validator) id(nodeID, field, value string) {
	if err := v.limits.CheckID(field, value); err != nil {
		v.add(nodeID, field, "%v", err)
	}
}

func (v *validator) add(nodeID, field, format string, args ...any) {
	v.problems = append(v.problems, Problem{NodeID: nodeID, Field: field, Message: fmt.Sprintf(format, args...)})
}

func (v *validator) run() {
	d := v.def
	if d.WorkflowID == "" {
		v.add("", "workflow_id", "is required")
	}
	if d.Version == "" {
		v.add("", "version", "is required")
	}
	v.id("", "workflow_id", d.WorkflowID)
	v.id("", "version", d.Version)
	v.id("", "lane", d.Lane)
	if d.DefaultTimeoutMS != nil && (*d.DefaultTimeoutMS <= 0 || *d.DefaultTimeoutMS > maxToolTimeoutMS) {
		v.add("", "default_timeout_ms", "must be from 1 to %d", maxToolTimeoutMS)
	}
	if len(d.Nodes) == 0 {
		v.add("", "nodes", "a workflow needs at least a start and an end node")
		return
	}
	if len(d.Nodes) > v.limits.Nodes {
		v.add("", "nodes", "%d nodes, over the limit of %d (limits.nodes)", len(d.Nodes), v.limits.Nodes)
		return
	}
	v.ids = make(map[string]*Node, len(d.Nodes))
	var starts []string
	for i, n := range d.Nodes {
		if n.ID == "" {
			v.add("", fmt.Sprintf("nodes[%d].id", i), "is required")
			continue
		}
		if len(n.ID) > v.limits.IDBytes {
			v.add("", fmt.Sprintf("nodes[%d].id", i), "%v", v.limits.CheckID("id", n.ID))
			continue
		}
		if _, dup := v.ids[n.ID]; dup {
			v.add(n.ID, "id", "duplicate node id %q", n.ID)
			continue
		}
		v.ids[n.ID] = n
		if n.Type == NodeStart {
			starts = append(starts, n.ID)
		}
	}
	switch {
	case len(starts) == 0:
		v.add("", "nodes", "missing a node of type start")
	case len(starts) > 1:
		for _, id := range starts[1:] {
			v.add(id, "type", "a workflow has exactly one start node; %q is the first", starts[0])
		}
	}
	conditions := 0
	for _, n := range d.Nodes {
		conditions += len(n.Condition)
	}
	if conditions > v.limits.ConditionBytesTotal {
		v.add("", "nodes", "the conditions add up to %d bytes, over the limit of %d (limits.conditionBytesTotal)", conditions, v.limits.ConditionBytesTotal)
		return
	}
	for _, n := range d.Nodes {
		if n.ID != "" && v.ids[n.ID] == n {
			v.node(n)
		}
	}
	if len(v.problems) > 0 {
		return // graph checks need sound edges
	}
	v.reachability(starts[0])
	v.cycles()
}

func (v *validator) edge(n *Node, field, target string) {
	if target == "" {
		v.add(n.ID, field, "is required")
		return
	}
	if _, ok := v.ids[target]; !ok {
		v.add(n.ID, field, "refers to unknown node %q", target)
	}
}

func (v *validator) node(n *Node) {
	if n.Type != NodeDecision && len(n.Branches) > 0 {
		// successors follows branches whatever the type: unchecked, they
		// would lead the graph checks to nodes that do not exist.
		v.add(n.ID, "branches", "only a decision node has branches")
	}
	switch n.Type {
	case NodeStart:
		v.edge(n, "next", n.Next)
	case NodeEnd:
		if n.Next != "" {
			v.add(n.ID, "next", "an end node has no next node")
		}
	case NodeDecision:
		if n.Condition == "" {
			v.add(n.ID, "condition", "is required")
		} else if c, err := compileCondition(n.Condition, v.limits); err != nil {
			v.add(n.ID, "condition", "invalid expression: %v", err)
		} else {
			n.condition = c
		}
		if len(n.Branches) == 0 {
			v.add(n.ID, "branches", "is required: map each outcome (\"true\", \"false\", …) to a node")
		}
		for _, k := range slices.Sorted(maps.Keys(n.Branches)) {
			v.id(n.ID, "branches."+k, k)
			v.edge(n, "branches."+k, n.Branches[k])
		}
		if n.Next != "" {
			v.add(n.ID, "next", "a decision goes on through its branches, not next")
		}
	case NodeTask:
		switch {
		case n.Task == "":
			v.add(n.ID, "task", "is required")
		case v.tools == nil || !v.tools.HasTool(n.Task):
			v.add(n.ID, "task", "unknown tool %q", n.Task)
		}
		if n.Retry != nil {
			if n.Retry.Max < 0 || n.Retry.Max > maxRetries {
				v.add(n.ID, "retry.max", "must be from 0 to %d", maxRetries)
			}
			if n.Retry.DelayMS < 0 || n.Retry.DelayMS > maxRetryDelayMS {
				v.add(n.ID, "retry.delay_ms", "must be from 0 to %d", maxRetryDelayMS)
			}
			if n.Retry.Backoff != "" && n.Retry.Backoff != "exponential" && n.Retry.Backoff != "linear" {
				v.add(n.ID, "retry.backoff", "must be exponential or linear, not %q", n.Retry.Backoff)
			}
		}
		if n.TimeoutMS != nil && (*n.TimeoutMS <= 0 || *n.TimeoutMS > maxToolTimeoutMS) {
			v.add(n.ID, "timeout_ms", "must be from 1 to %d", maxToolTimeoutMS)
		}
		v.edge(n, "next", n.Next)
	case NodeAction:
		v.action(n, "", n.ActionType, n.Parameters)
		v.edge(n, "next", n.Next)
	case "":
		v.add(n.ID, "type", "is required")
	default:
		v.add(n.ID, "type", "unknown node type %q: use start, end, decision, task or action", n.Type)
	}
}

// action checks an action's type and parameters; prefix locates a timeout
// action inside its wait node.
func (v *validator) action(n *Node, prefix, actionType string, params map[string]any) {
	if actionType == "" {
		v.add(n.ID, prefix+"actionType", "is required")
		return
	}
	if !knownActions[actionType] {
		v.add(n.ID, prefix+"actionType", "unknown action type %q", actionType)
		return
	}
	p := prefix + "parameters."
	str := func(key string) {
		if s, ok := params[key].(string); !ok || s == "" {
			v.add(n.ID, p+key, "is required (a string)")
		}
	}
	switch actionType {
	case ActionSendMessage:
		str("message")
	case ActionSetVariables:
		if _, ok := params["values"].(map[string]any); !ok {
			v.add(n.ID, p+"values", "is required (an object of variables)")
		}
	case ActionTriggerAgent:
		str("workflow_id")
	case ActionRequestDocument:
		if docs, ok := params["documents"].([]any); !ok || len(docs) == 0 {
			v.add(n.ID, p+"documents", "is required (a list of document types)")
		}
	case ActionRequestSignature:
		str("document_url")
	case ActionAssignTest:
		str("test_id")
	case ActionWaitForEvent:
		str("event_id")
	case ActionRequestInput:
		str("prompt")
	case ActionDelay:
		_, hasDuration := params["duration"]
		_, hasUntil := params["until"]
		if !hasDuration && !hasUntil {
			v.add(n.ID, p+"duration", "delay needs a duration or an until time")
		}
		if s, ok := params["until"].(string); ok && !IsTemplate(s) {
			if _, err := time.Parse(time.RFC3339, s); err != nil {
				v.add(n.ID, p+"until", "must be an RFC 3339 time: %v", err)
			}
		}
	}
	if kind, ok := waitKinds[actionType]; ok {
		if prefix != "" {
			v.add(n.ID, prefix+"actionType", "a timeout action cannot wait")
			return
		}
		v.waitParams(n, kind, params)
	}
}

func (v *validator) waitParams(n *Node, kind WaitKind, params map[string]any) {
	key := "timeout"
	if kind.WaitingFor == "delay" {
		key = "duration"
	}
	if raw, ok := params[key]; ok {
		s, isStr := raw.(string)
		switch {
		case !isStr:
			v.add(n.ID, "parameters."+key, "must be a duration string such as \"30s\", \"24h\" or \"7d\"")
		case IsTemplate(s):
			// Resolved when the node runs; checked against the maximum then.
		default:
			d, err := ParseDuration(s)
			switch {
			case err != nil:
				v.add(n.ID, "parameters."+key, "%v", err)
			case d <= 0:
				v.add(n.ID, "parameters."+key, "must be positive")
			case d > kind.Max:
				v.add(n.ID, "parameters."+key, "%s is over the maximum of %s for a %s wait", s, FormatDays(kind.Max), kind.WaitingFor)
			}
		}
	}
	if raw, ok := params["onTimeout"]; ok {
		s, _ := raw.(string)
		switch {
		case s != "continue" && s != "fail" && s != "retry":
			v.add(n.ID, "parameters.onTimeout", "must be continue, fail or retry")
		case s == "retry" && kind.WaitingFor == "agent":
			v.add(n.ID, "parameters.onTimeout", "an agent wait cannot retry: its child is cancelled when the wait times out; use continue or fail")
		}
	}
	if raw, ok := params["maxRetries"]; ok {
		if f, isNum := raw.(float64); !isNum || f < 0 || f > maxRetries || f != float64(int(f)) {
			v.add(n.ID, "parameters.maxRetries", "must be an integer from 0 to %d", maxRetries)
		}
	}
	if raw, ok := params["timeoutActions"]; ok {
		list, isList := raw.([]any)
		if !isList {
			v.add(n.ID, "parameters.timeoutActions", "must be a list of actions")
			return
		}
		if len(list) > maxTimeoutActions {
			v.add(n.ID, "parameters.timeoutActions", "%d actions, over the limit of %d", len(list), maxTimeoutActions)
			return
		}
		for i, item := range list {
			prefix := fmt.Sprintf("parameters.timeoutActions[%d].", i)
			obj, isObj := item.(map[string]any)
			if !isObj {
				v.add(n.ID, prefix[:len(prefix)-1], "must be an action object")
				continue
			}
			at, _ := obj["actionType"].(string)
			ps, _ := obj["parameters"].(map[string]any)
			v.action(n, prefix, at, ps)
		}
	}
}

// reachability reports every node that cannot be reached from the start.
func (v *validator) reachability(start string) {
	seen := map[string]bool{start: true}
	queue := []string{start}
	for len(queue) > 0 {
		n := v.ids[queue[0]]
		queue = queue[1:]
		for _, s := range n.successors() {
			if !seen[s] {
				seen[s] = true
				queue = append(queue, s)
			}
		}
	}
	for _, n := range v.def.Nodes {
		if !seen[n.ID] {
			v.add(n.ID, "id", "node %q cannot be reached from the start node", n.ID)
		}
	}
	endReachable := false
	for id := range seen {
		if v.ids[id].Type == NodeEnd {
			endReachable = true
		}
	}
	if !endReachable {
		v.add("", "nodes", "no end node can be reached from the start node")
	}
}

// cycles reports each loop that has no waiting node in it: such a loop would
// spin forever without committing.
func (v *validator) cycles() {
	const (
		white = iota
		grey
		black
	)
	color := make(map[string]int, len(v.ids))
	var stack []string
	reported := map[string]bool{}
	var visit func(id string)
	visit = func(id string) {
		color[id] = grey
		stack = append(stack, id)
		for _, s := range v.ids[id].successors() {
			if v.ids[s].Waits() {
				continue // a loop through a wait commits each turn
			}
			switch color[s] {
			case white:
				visit(s)
			case grey:
				if !reported[s] {
					reported[s] = true
					i := slices.Index(stack, s)
					loop := append([]string(nil), stack[i:]...)
					v.add(s, "next", "cycle with no wait in it: %v", append(loop, s))
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[id] = black
	}
	for _, n := range v.def.Nodes {
		if color[n.ID] == white && !n.Waits() {
			visit(n.ID)
		}
	}
}

// FormatDays writes a duration in whole days when it is one ("7d").
func FormatDays(d time.Duration) string {
	if d%day == 0 {
		return fmt.Sprintf("%dd", d/day)
	}
	return d.String()
}
