package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

type someTools struct{}

func (someTools) HasTool(name string) bool { return name == "fetch" }

// numbers is a list of n numbers, as a variable holds it.
func numbers(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = float64(i)
	}
	return out
}

func TestConditionCostIsRefusedWhenStored(t *testing.T) {
	t.Parallel()
	for _, source := range []string{
		"${arr}.exists(a, ${arr}.exists(b, b < 0))",
		"arr.all(a, arr.all(b, arr.all(c, a + b + c > 0.0)))",
		"${arr}.map(a, ${arr}.map(b, a * b)).size() > 0",
	} {
		_, err := compileCondition(source, DefaultLimits())
		var le *LimitError
		require.ErrorAs(t, err, &le, source)
		require.Equal(t, "limits.conditionCost × 100", le.Limit, source)
	}
	// Functions that build large strings cheaply do not exist.
	_, err := compileCondition(`len(repeat(repeat("ab", 499999), 999999)) > 0`, DefaultLimits())
	require.ErrorContains(t, err, "repeat")
	_, err = compileCondition(strings.Repeat("(", 200)+"1"+strings.Repeat(")", 200), DefaultLimits())
	require.Error(t, err, "nesting past the parser's recursion limit")
	_, err = compileCondition(strings.Repeat("a", 5000), DefaultLimits())
	require.ErrorAs(t, err, new(*LimitError))
}

func TestConditionCostIsCheckedOnTheVariables(t *testing.T) {
	t.Parallel()
	c, err := compileCondition("${arr}.map(x, x * 2.0).exists(x, x < 0.0)", DefaultLimits())
	require.NoError(t, err, "one pass over a list is fine when stored")
	got, err := c.eval(context.Background(), Variables{"arr": numbers(1000)})
	require.NoError(t, err)
	require.Equal(t, false, got)
	_, err = c.eval(context.Background(), Variables{"arr": numbers(500_000)})
	require.ErrorIs(t, err, ErrConditionCost)
}

func TestConditionValuesMustBeFinite(t *testing.T) {
	t.Parallel()
	vars := Variables{"a": 1.0, "b": 0.0}
	for _, source := range []string{"${a} / ${b}", "-${a} / ${b}", "${b} / ${b}"} {
		c, err := compileCondition(source, DefaultLimits())
		require.NoError(t, err, source)
		_, err = c.eval(context.Background(), vars)
		require.ErrorContains(t, err, "not a finite number", source)
	}
	// Inside a list or a map, CEL's JSON conversion spells an infinity as
	// text, or the value is refused: either way it encodes.
	for _, source := range []string{"[${a} / ${b}]", "{'k': ${b} / ${b}}"} {
		c, err := compileCondition(source, DefaultLimits())
		require.NoError(t, err, source)
		got, err := c.eval(context.Background(), vars)
		if err == nil {
			_, err = json.Marshal(got)
			require.NoError(t, err, "%s gave %v", source, got)
		}
	}
	c, err := compileCondition("${a} / ${b} > 1.0", DefaultLimits())
	require.NoError(t, err)
	got, err := c.eval(context.Background(), vars)
	require.NoError(t, err)
	require.Equal(t, true, got, "comparing an infinity is fine")
	// The value is safe to encode as JSON, as every step event does.
	c, err = compileCondition("{'x': [${a}, 'b', null]}", DefaultLimits())
	require.NoError(t, err)
	got, err = c.eval(context.Background(), vars)
	require.NoError(t, err)
	_, err = json.Marshal(got)
	require.NoError(t, err)
}

func TestRenderingStopsAtItsBudget(t *testing.T) {
	t.Parallel()
	vars := Variables{"s": strings.Repeat("x", 10_000), "obj": map[string]any{"list": numbers(1000)}}
	in := NewInterpolation(vars, 64<<10)
	out := in.Text(strings.Repeat("{{s}}", 100))
	var le *LimitError
	require.ErrorAs(t, in.Err(), &le)
	require.Equal(t, "limits.renderBytes", le.Limit)
	require.LessOrEqual(t, len(out), 64<<10)

	// A value that is one placeholder is shared, not copied, but it is
	// counted: values that refer to each other cannot double in size
	// from node to node.
	in = NewInterpolation(vars, 64<<10)
	values := map[string]any{}
	for i := range 100 {
		values[fmt.Sprint(i)] = "{{obj}}"
	}
	in.Value(values)
	require.ErrorAs(t, in.Err(), &le)

	in = NewInterpolation(vars, 64<<10)
	require.Equal(t, "x=", in.Text("x={{missing}}"))
	require.NoError(t, in.Err())
}

// linear is a definition of n set_variables nodes in a row.
func linear(n int) *Definition {
	nodes := []*Node{{ID: "start", Type: NodeStart, Next: "n0"}}
	for i := range n {
		next := fmt.Sprintf("n%d", i+1)
		if i == n-1 {
			next = "end"
		}
		nodes = append(nodes, &Node{ID: fmt.Sprintf("n%d", i), Type: NodeAction, ActionType: ActionSetVariables,
			Parameters: map[string]any{"values": map[string]any{}}, Next: next})
	}
	nodes = append(nodes, &Node{ID: "end", Type: NodeEnd})
	return &Definition{WorkflowID: "w", Version: "1", Nodes: nodes}
}

// diamonds is a definition of n decisions in a row, each branching to two
// nodes that meet again at the next decision, ending in a task: 2^n paths.
func diamonds(n int) *Definition {
	nodes := []*Node{{ID: "start", Type: NodeStart, Next: "d0"}}
	for i := range n {
		next := fmt.Sprintf("d%d", i+1)
		if i == n-1 {
			next = "work"
		}
		nodes = append(nodes,
			&Node{ID: fmt.Sprintf("d%d", i), Type: NodeDecision, Condition: "${x} > 1", Branches: map[string]string{"true": fmt.Sprintf("a%d", i), "false": fmt.Sprintf("b%d", i)}},
			&Node{ID: fmt.Sprintf("a%d", i), Type: NodeAction, ActionType: ActionSetVariables, Parameters: map[string]any{"values": map[string]any{}}, Next: next},
			&Node{ID: fmt.Sprintf("b%d", i), Type: NodeAction, ActionType: ActionSetVariables, Parameters: map[string]any{"values": map[string]any{}}, Next: next})
	}
	nodes = append(nodes, &Node{ID: "work", Type: NodeTask, Task: "fetch", Next: "end"}, &Node{ID: "end", Type: NodeEnd})
	return &Definition{WorkflowID: "w", Version: "1", Nodes: nodes}
}

func TestValidationIsLinear(t *testing.T) {
	t.Parallel()
	d := linear(DefaultLimits().Nodes - 2)
	require.NoError(t, d.Validate(someTools{}, Limits{}))
	require.Equal(t, DefaultLimits().Nodes, d.Remaining("start"))
	require.False(t, d.FirstStepSettles(100), "a chain longer than a step settles in no first step")

	// 2^600 paths: walking each once would never end.
	d = diamonds(600)
	require.NoError(t, d.Validate(someTools{}, Limits{}))
	require.False(t, d.FirstStepSettles(10_000))
	require.Equal(t, 2*600+3, d.Remaining("start"))

	err := linear(DefaultLimits().Nodes).Validate(someTools{}, Limits{})
	var ve *ValidationError
	require.True(t, errors.As(err, &ve))
	require.Equal(t, "nodes", ve.Problems[0].Field)
	require.Contains(t, ve.Problems[0].Message, "limits.nodes")
}

func TestIDsAreBounded(t *testing.T) {
	t.Parallel()
	d := linear(3)
	d.WorkflowID = strings.Repeat("w", 256)
	d.Nodes[1].ID = strings.Repeat("n", 300_000)
	err := d.Validate(someTools{}, Limits{})
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
	fields := []string{}
	for _, p := range ve.Problems {
		fields = append(fields, p.Field)
		require.Less(t, len(p.Message), 200, "a problem does not echo the whole id")
	}
	require.Contains(t, fields, "workflow_id")
	require.Contains(t, fields, "nodes[1].id")
}

// BenchmarkValidate measures validation of a chain of 1,000 nodes and of
// the largest definition the default limits allow, and of the 2^600-path
// diamonds.
func BenchmarkValidate(b *testing.B) {
	for _, tc := range []struct {
		name string
		def  func() *Definition
	}{
		{"chain-1000", func() *Definition { return linear(1000) }},
		{"chain-max", func() *Definition { return linear(DefaultLimits().Nodes - 2) }},
		{"diamonds-600", func() *Definition { return diamonds(600) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if err := tc.def().Validate(someTools{}, Limits{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// manyConditions is a definition of n decisions in a row, each with a
// condition of about size bytes.
func manyConditions(n, size int) *Definition {
	cond := strings.Repeat("${a.b.c} == 'xx' || ", size/20) + "true"
	nodes := []*Node{{ID: "start", Type: NodeStart, Next: "d0"}}
	for i := range n {
		next := fmt.Sprintf("d%d", i+1)
		if i == n-1 {
			next = "end"
		}
		nodes = append(nodes, &Node{ID: fmt.Sprintf("d%d", i), Type: NodeDecision, Condition: cond, Branches: map[string]string{"true": next, "false": next}})
	}
	nodes = append(nodes, &Node{ID: "end", Type: NodeEnd})
	return &Definition{WorkflowID: "w", Version: "1", Nodes: nodes}
}

func TestConditionsAreBoundedTogether(t *testing.T) {
	t.Parallel()
	require.NoError(t, manyConditions(7, 4000).Validate(someTools{}, Limits{}))
	err := manyConditions(250, 4000).Validate(someTools{}, Limits{})
	require.ErrorContains(t, err, "limits.conditionBytesTotal")
}

// BenchmarkValidateConditions measures the most condition text a
// definition may hold, in the largest conditions allowed.
func BenchmarkValidateConditions(b *testing.B) {
	for b.Loop() {
		if err := manyConditions(8, 4000).Validate(someTools{}, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCondition measures a typical decision condition, and one pass
// over a 1,000-item list, whose cost is estimated on the list first.
func BenchmarkCondition(b *testing.B) {
	vars := Variables{"document": map[string]any{"language": "es"}, "arr": numbers(1000)}
	for _, source := range []string{"${document.language} == 'es'", "${arr}.exists(x, x < 0.0)"} {
		c, err := compileCondition(source, DefaultLimits())
		if err != nil {
			b.Fatal(err)
		}
		b.Run(source, func(b *testing.B) {
			for b.Loop() {
				if _, err := c.eval(context.Background(), vars); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestMissingPlaceholdersAreRememberedOnceAndFew(t *testing.T) {
	t.Parallel()
	in := NewInterpolation(Variables{}, 1<<20)
	in.Text(strings.Repeat("{{a}}", 150_000))
	require.Equal(t, []string{"a"}, in.Missing)
	var many strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&many, "{{v%d}}", i)
	}
	in = NewInterpolation(Variables{}, 1<<20)
	in.Text(many.String())
	require.Len(t, in.Missing, 10)
}

func TestTimeoutActionsAreFew(t *testing.T) {
	t.Parallel()
	actions := make([]any, 11)
	for i := range actions {
		actions[i] = map[string]any{"actionType": "send_message", "parameters": map[string]any{"message": "hola"}}
	}
	d := linear(1)
	d.Nodes[1] = &Node{ID: "n0", Type: NodeAction, ActionType: ActionWaitForResponse, Next: "end",
		Parameters: map[string]any{"timeout": "1h", "onTimeout": "continue", "timeoutActions": actions}}
	require.ErrorContains(t, d.Validate(someTools{}, Limits{}), "11 actions, over the limit of 10")
	d.Nodes[1].Parameters["timeoutActions"] = actions[:10]
	require.NoError(t, d.Validate(someTools{}, Limits{}))
}
