package workflow

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// fuzzTemplateVars are the variables fuzzed templates render: values of
// each kind, a long string, names with spaces and digits, and values that
// look like placeholders themselves (they are not rendered again).
var fuzzTemplateVars = Variables{
	"name": "Ana", "score": 7.0, "big": 1e300, "neg": -0.5, "ok": true, "none": nil, "empty": "",
	"tags":    []any{"a", "b", "c"},
	"items":   []any{map[string]any{"x": "first", "n": 1.0}, map[string]any{"x": "second"}},
	"doc":     map[string]any{"language": "es", "pages": []any{1.0, 2.0}, "meta": map[string]any{"k": "v"}},
	"nested":  []any{[]any{1.0, 2.0}, []any{}},
	"long":    strings.Repeat("x", 3000),
	"brace":   "{{name}}",
	"dollar":  "${name}",
	"0":       "zero",
	"a b":     "spaced",
	"unicode": "ñandú 🐢",
}

// FuzzTemplate renders arbitrary templates, as text and as JSON values,
// within an arbitrary budget. It never panics; and against a rendering
// with no budget to speak of:
//   - Text writes at most the budget (never more, not even one variable's
//     text more): the whole text when it fits, else a prefix of it;
//   - Err() is a *LimitError exactly when the whole rendering is over the
//     budget, and nil otherwise;
//   - Value spends what it builds: its strings and keys never add up to
//     more than the budget, and within it the value is the whole one.
func FuzzTemplate(f *testing.F) {
	for _, s := range []struct {
		text  string
		value string
		limit uint16
	}{
		{"Hola {{name}}, necesito ${tags} ({{ score }})", `{"m":"{{doc}}","l":["${tags}",1,true,null]}`, 1000},
		{"{{long}}{{long}}", `"{{long}}"`, 3000},
		{"{{long}}", `"{{long}}"`, 2999},
		{"x={{nope}} {{brace}} ${dollar}", `{"{{name}}":"{{nope}}"}`, 0},
		{"{{items}} {{nested}} {{doc.pages.1}} {{items.1.x}} {{ a b }} {{0}} {{big}} {{none}}", `["{{items}}","{{ok}}"]`, 64},
		{"{{{{name}}}} ${${name}} {{}} ${} {{name", `[[[["{{unicode}}"]]]]`, 10},
		{strings.Repeat("{{tags}}", 50), `{"a":{"b":{"c":"${long}"}}}`, 65535},
	} {
		f.Add(s.text, []byte(s.value), s.limit)
	}
	f.Fuzz(func(t *testing.T, text string, value []byte, limit uint16) {
		checkText(t, text, int(limit))
		var v any = text
		if json.Unmarshal(value, &v) != nil {
			v = text
		}
		checkValue(t, v, int(limit))
	})
}

// noBudget is a budget rendering never reaches in a test.
const noBudget = math.MaxInt / 2

func checkText(t *testing.T, text string, limit int) {
	t.Helper()
	ref := NewInterpolation(fuzzTemplateVars, noBudget)
	whole := ref.Text(text)
	if ref.Err() != nil {
		t.Fatalf("rendering with no budget failed: %v", ref.Err())
	}
	in := NewInterpolation(fuzzTemplateVars, limit)
	out := in.Text(text)
	if len(out) > limit {
		t.Fatalf("rendered %d bytes on a budget of %d", len(out), limit)
	}
	if len(whole) <= limit {
		if in.Err() != nil || out != whole {
			t.Fatalf("%d bytes fit a budget of %d, but rendering gave %q, %v", len(whole), limit, out, in.Err())
		}
		if !reflect.DeepEqual(in.Missing, ref.Missing) {
			t.Fatalf("missing %q, not %q", in.Missing, ref.Missing)
		}
		return
	}
	requireLimitError(t, in.Err(), limit)
	if !strings.HasPrefix(whole, out) {
		t.Fatalf("rendering cut short gave %q, not a prefix of %q", out, whole)
	}
	if again := in.Text(text); again != "" || in.Err() == nil {
		t.Fatalf("rendering after the budget ran out gave %q, %v", again, in.Err())
	}
}

func checkValue(t *testing.T, v any, limit int) {
	t.Helper()
	ref := NewInterpolation(fuzzTemplateVars, noBudget)
	whole := ref.Value(v)
	if ref.Err() != nil {
		t.Fatalf("rendering with no budget failed: %v", ref.Err())
	}
	spent := noBudget - ref.budget
	in := NewInterpolation(fuzzTemplateVars, limit)
	out := in.Value(v)
	if n := builtBytes(out); n > limit {
		t.Fatalf("built %d bytes of strings and keys on a budget of %d", n, limit)
	}
	if spent <= limit {
		if in.Err() != nil || !reflect.DeepEqual(out, whole) {
			t.Fatalf("%d bytes fit a budget of %d, but rendering gave %v, %v", spent, limit, out, in.Err())
		}
		return
	}
	requireLimitError(t, in.Err(), limit)
}

func requireLimitError(t *testing.T, err error, limit int) {
	t.Helper()
	var le *LimitError
	if !errors.As(err, &le) || le != err {
		t.Fatalf("rendering over a budget of %d returned %T (%v), not a *LimitError", limit, err, err)
	}
	if le.Limit != "limits.renderBytes" || le.Max != int64(limit) {
		t.Fatalf("the limit error names %s = %d, not limits.renderBytes = %d", le.Limit, le.Max, limit)
	}
}

// builtBytes adds up the lengths of the strings and map keys in v.
func builtBytes(v any) int {
	switch x := v.(type) {
	case string:
		return len(x)
	case []any:
		n := 0
		for _, e := range x {
			n += builtBytes(e)
		}
		return n
	case map[string]any:
		n := 0
		for k, e := range x {
			n += len(k) + builtBytes(e)
		}
		return n
	}
	return 0
}
