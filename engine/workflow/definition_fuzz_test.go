package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// fuzzTools is the ToolChecker of the fuzz targets: it knows the tools of
// the example definitions.
type fuzzTools map[string]bool

func (t fuzzTools) HasTool(name string) bool { return t[name] }

var fuzzToolSet = fuzzTools{"document_processor": true, "echo": true}

// FuzzDefinition parses and validates arbitrary bytes as a definition. It
// never panics; every refusal is a *ValidationError with at least one
// problem; what is accepted is one JSON value; and a valid definition is
// indexed consistently: one start node, shortest distances to an end that
// agree with the edges, and conditions that evaluate.
//
// Its seeds are the small hostileDefinitions (unknown types, huge ids,
// durations, trailing data…) and testdata/fuzz/FuzzDefinition: the example
// definitions of the repository and what fuzzing found.
func FuzzDefinition(f *testing.F) {
	seeds := hostileDefinitions()
	for _, name := range slices.Sorted(maps.Keys(seeds)) {
		// The large ones are left to TestHostileDefinitions: mutating and
		// minimizing a 200 KB input slows fuzzing to a crawl.
		if len(seeds[name]) <= 4<<10 {
			f.Add([]byte(seeds[name]))
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkDefinition(t, raw)
	})
}

func checkDefinition(t *testing.T, raw []byte) {
	t.Helper()
	def, err := ParseDefinition(raw)
	if err != nil {
		requireValidationError(t, "ParseDefinition", err)
		if def != nil {
			t.Fatalf("ParseDefinition returned a definition and an error")
		}
		return
	}
	if def == nil {
		t.Fatalf("ParseDefinition returned neither a definition nor an error")
	}
	if !json.Valid(raw) {
		t.Fatalf("ParseDefinition accepted a payload that is not one JSON value: %q", raw)
	}
	if err := def.Validate(fuzzToolSet, DefaultLimits()); err != nil {
		requireValidationError(t, "Validate", err)
		return
	}
	checkIndexed(t, def)
}

func requireValidationError(t *testing.T, what string, err error) {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) || ve != err {
		t.Fatalf("%s returned %T (%v), not a *ValidationError", what, err, err)
	}
	if len(ve.Problems) == 0 {
		t.Fatalf("%s returned a *ValidationError with no problem", what)
	}
	_ = ve.Error()
}

// checkIndexed checks the lookup tables of a valid definition.
func checkIndexed(t *testing.T, def *Definition) {
	t.Helper()
	start := def.Start()
	if start == nil || start.Type != NodeStart {
		t.Fatalf("a valid definition has no start node: %+v", start)
	}
	if def.Remaining(start.ID) <= 0 {
		t.Fatalf("an end is reachable from the start, but Remaining(%q) = %d", start.ID, def.Remaining(start.ID))
	}
	for id, b := range def.settle {
		if b < 0 || b > len(def.Nodes) {
			t.Fatalf("the bound %d of a step from %s is not within 0..%d nodes", b, id, len(def.Nodes))
		}
	}
	for _, n := range def.Nodes {
		if def.Node(n.ID) != n {
			t.Fatalf("Node(%q) is not the node of that id", n.ID)
		}
		r := def.Remaining(n.ID)
		succ := n.successors()
		for _, s := range succ {
			if def.Node(s) == nil {
				t.Fatalf("node %q goes to unknown node %q", n.ID, s)
			}
		}
		switch {
		case n.Type == NodeEnd:
			if r != 1 {
				t.Fatalf("end node %q has Remaining %d, not 1", n.ID, r)
			}
		case r == 0:
			for _, s := range succ {
				if def.Remaining(s) != 0 {
					t.Fatalf("node %q reaches no end, but its successor %q does", n.ID, s)
				}
			}
		default:
			best := 0
			for _, s := range succ {
				if rs := def.Remaining(s); rs > 0 && (best == 0 || rs < best) {
					best = rs
				}
			}
			if best != r-1 {
				t.Fatalf("node %q has Remaining %d, but its nearest successor has %d", n.ID, r, best)
			}
		}
		if n.Type == NodeDecision {
			if n.condition == nil {
				t.Fatalf("decision %q of a valid definition has no compiled condition", n.ID)
			}
			if v, err := n.EvalCondition(context.Background(), fuzzConditionVars); err == nil {
				checkConditionValue(t, n.Condition, v)
				_ = BranchKey(v)
			}
		}
	}
}

// hostileDefinitions are definitions written to hurt: the small ones seed
// FuzzDefinition, and TestHostileDefinitions checks them all.
func hostileDefinitions() map[string]string {
	node := func(id, typ, next string) string {
		switch typ {
		case NodeEnd:
			return fmt.Sprintf(`{"id":%q,"type":"end"}`, id)
		case NodeAction:
			return fmt.Sprintf(`{"id":%q,"type":"action","actionType":"set_variables","parameters":{"values":{"x":"{{x}}"}},"next":%q}`, id, next)
		}
		return fmt.Sprintf(`{"id":%q,"type":%q,"next":%q}`, id, typ, next)
	}
	def := func(nodes ...string) string {
		return `{"workflow_id":"w","version":"1","nodes":[` + strings.Join(nodes, ",") + `]}`
	}
	chain := func(n int, last string) []string {
		out := []string{node("start", NodeStart, "n0")}
		for i := range n {
			next := fmt.Sprintf("n%d", i+1)
			if i == n-1 {
				next = last
			}
			out = append(out, node(fmt.Sprintf("n%d", i), NodeAction, next))
		}
		return out
	}
	seeds := map[string]string{}
	// A long cycle with no wait in it, and an end nobody can reach.
	seeds["cycle-500"] = def(append(chain(500, "n0"), node("end", NodeEnd, ""))...)
	// The longest chain the limits allow, and one node too many.
	seeds["chain-1998"] = def(append(chain(1998, "end"), node("end", NodeEnd, ""))...)
	seeds["chain-2001"] = def(append(chain(2001, "end"), node("end", NodeEnd, ""))...)
	// Decisions whose branches all meet again: 2^300 paths.
	var diamonds []string
	diamonds = append(diamonds, node("start", NodeStart, "d0"))
	for i := range 300 {
		next := fmt.Sprintf("d%d", i+1)
		if i == 299 {
			next = "end"
		}
		diamonds = append(diamonds,
			fmt.Sprintf(`{"id":"d%d","type":"decision","condition":"${x.y.0} > %d","branches":{"true":"a%d","false":"b%d"}}`, i, i, i, i),
			node(fmt.Sprintf("a%d", i), NodeAction, next), node(fmt.Sprintf("b%d", i), NodeAction, next))
	}
	seeds["diamonds-300"] = def(append(diamonds, node("end", NodeEnd, ""))...)
	// A loop through a wait, which is allowed.
	seeds["wait-loop"] = def(node("start", NodeStart, "ask"),
		`{"id":"ask","type":"action","actionType":"wait_for_response","parameters":{"timeout":"7d","onTimeout":"retry","maxRetries":3,"timeoutActions":[{"actionType":"send_message","parameters":{"message":"?"}}]},"next":"check"}`,
		`{"id":"check","type":"decision","condition":"${response} == 'yes'","branches":{"true":"end","false":"ask"}}`,
		node("end", NodeEnd, ""))
	// Ids and names over limits.idBytes.
	huge := strings.Repeat("n", 300)
	seeds["huge-ids"] = `{"workflow_id":"` + strings.Repeat("w", 256) + `","version":"1","lane":"` + strings.Repeat("l", 300) + `","nodes":[` +
		node("start", NodeStart, huge) + "," + node(huge, NodeAction, "end") + "," +
		`{"id":"d","type":"decision","condition":"true","branches":{"` + huge + `":"end"}},` + node("end", NodeEnd, "") + `]}`
	// Unknown node and action types, unknown fields, wrong JSON types.
	seeds["unknown-types"] = def(node("start", NodeStart, "x"), `{"id":"x","type":"loop","next":"y"}`,
		`{"id":"y","type":"action","actionType":"launch_missiles","next":"z"}`, `{"id":"z","type":"task","task":"nope","retry":{"max":-1,"backoff":"random","delay_ms":1e9},"timeout_ms":0,"next":"end"}`,
		`{"id":"end","type":"end","bogus":1}`)
	seeds["wrong-json-types"] = `{"workflow_id":1,"version":"1","nodes":{"id":"start"}}`
	seeds["no-nodes"] = `{"workflow_id":"w","version":"1","nodes":[]}`
	seeds["null-nodes"] = `{"workflow_id":"w","version":"1","nodes":[null,{},null]}`
	seeds["two-starts"] = def(node("start", NodeStart, "end"), node("start2", NodeStart, "end"), node("start", NodeEnd, ""), node("end", NodeEnd, ""))
	seeds["bad-durations"] = def(node("start", NodeStart, "w1"),
		`{"id":"w1","type":"action","actionType":"delay","parameters":{"duration":"1e308d"},"next":"w2"}`,
		`{"id":"w2","type":"action","actionType":"delay","parameters":{"duration":"-1h","until":"tomorrow"},"next":"w3"}`,
		`{"id":"w3","type":"action","actionType":"trigger_agent","parameters":{"workflow_id":"c","waitForCompletion":true,"timeout":"{{t}}","onTimeout":"retry"},"next":"end"}`,
		node("end", NodeEnd, ""))
	seeds["bad-condition"] = def(node("start", NodeStart, "d"),
		`{"id":"d","type":"decision","condition":"${a} ==","branches":{"true":"end"}}`, node("end", NodeEnd, ""))
	seeds["trailing-data"] = def(node("start", NodeStart, "end"), node("end", NodeEnd, "")) + ` {}`
	seeds["deep-json"] = strings.Repeat(`{"nodes":[`, 2000) + strings.Repeat(`]}`, 2000)
	return seeds
}

// TestHostileDefinitions checks the properties of FuzzDefinition on every
// hostile definition, the large ones too: long cycles with no wait, the
// longest chain the limits allow and one too many, 2^300 paths.
func TestHostileDefinitions(t *testing.T) {
	t.Parallel()
	seeds := hostileDefinitions()
	for _, name := range slices.Sorted(maps.Keys(seeds)) {
		t.Run(name, func(t *testing.T) { checkDefinition(t, []byte(seeds[name])) })
	}
}

// TestBranchesOnlyOnDecisions is FuzzDefinition's first crasher
// (testdata/fuzz/FuzzDefinition/branches-on-a-start-node): branches on a
// node that is not a decision went unchecked, and the reachability check
// followed one to a node that does not exist and panicked.
func TestBranchesOnlyOnDecisions(t *testing.T) {
	t.Parallel()
	for _, typ := range []string{NodeStart, NodeAction, NodeTask, NodeEnd} {
		d := &Definition{WorkflowID: "w", Version: "1", Nodes: []*Node{
			{ID: "s", Type: NodeStart, Next: "x"},
			{ID: "x", Type: NodeAction, ActionType: ActionSendMessage, Parameters: map[string]any{"message": "hi"}, Next: "e"},
			{ID: "t", Type: NodeTask, Task: "echo", Next: "e"},
			{ID: "e", Type: NodeEnd},
		}}
		for _, n := range d.Nodes {
			if n.Type == typ {
				n.Branches = map[string]string{"true": "nowhere"}
			}
		}
		err := d.Validate(fuzzToolSet, DefaultLimits())
		var ve *ValidationError
		if !errors.As(err, &ve) || !strings.Contains(ve.Error(), "only a decision node has branches") {
			t.Fatalf("branches on a %s node: %v", typ, err)
		}
	}
}

// TestTrailingDataIsRefused is FuzzDefinition's second finding
// (testdata/fuzz/FuzzDefinition/trailing-brace): json.Decoder.More reports
// no more data before a stray ] or }, so "{…} }" was accepted.
func TestTrailingDataIsRefused(t *testing.T) {
	t.Parallel()
	valid := `{"workflow_id":"w","version":"1","nodes":[{"id":"s","type":"start","next":"e"},{"id":"e","type":"end"}]}`
	_, err := ParseDefinition([]byte(valid + " \n"))
	if err != nil {
		t.Fatalf("white space after the definition: %v", err)
	}
	for _, tail := range []string{"}", "]", " ]", "{}", "1", `"x"`} {
		_, err := ParseDefinition([]byte(valid + tail))
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Problems[0].Message != "unexpected data after the JSON value" {
			t.Fatalf("%q after the definition: %v", tail, err)
		}
	}
}
