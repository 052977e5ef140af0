package workflow

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// fuzzConditionVars are the variables fuzzed conditions run against: JSON
// values of each kind, names CEL reserves, and a list long enough that a
// pass inside a pass costs something.
var fuzzConditionVars = func() Variables {
	long := make([]any, 300)
	for i := range long {
		long[i] = float64(i)
	}
	return Variables{
		"score": 7.0, "zero": 0.0, "neg": -2.5, "big": 1e308, "tiny": 5e-324, "ok": true, "none": nil,
		"name": "Ana", "empty": "", "in": "yes", "type": "pdf", "max": 10.0,
		"tags":  []any{"a", "b", "c"},
		"items": []any{map[string]any{"x": "first", "n": 1.0}, map[string]any{"x": "second", "n": 2.0}},
		"doc":   map[string]any{"language": "es", "pages": []any{1.0, 2.0}, "meta": map[string]any{"k": "v"}},
		"long":  long,
		"text":  strings.Repeat("ab", 500),
	}
}()

// conditionEvalBound is how long one evaluation may take: the package's own
// deadline, plus room for the cost estimate before it and a loaded machine.
const conditionEvalBound = evalDeadline + 2*time.Second

// FuzzCondition compiles arbitrary condition text with the default limits
// and evaluates what compiles against fuzzConditionVars. It never panics;
// a condition over limits.conditionBytes is a *LimitError; an evaluation
// returns within conditionEvalBound, and its value is JSON-like with no
// infinity or NaN in it.
func FuzzCondition(f *testing.F) {
	for _, s := range []string{
		"${doc.language} == 'es'", "doc.language == 'en'", "${customer.tier} == nil", "score > 5 && ok != true",
		"len(tags) == 2", "${items.0.x} == 'first'", "${items.5.x} == null", "${in} == 'yes'", "${score} * 1.5",
		"${tags}.exists(t, t == 'b')", "${long}.map(a, ${long}.filter(b, a < b).size()).size() > 0",
		"${long}.all(a, ${long}.all(b, ${long}.all(c, a + b + c >= 0.0)))", "1.0 / 0.0", "${score} / ${zero}",
		"[${zero} / ${zero}]", "{'k': -1.0 / 0.0}", "double('NaN')", "${big} * 10.0", "9223372036854775807 + 1",
		"-9223372036854775808 / -1", "int(${big})", "text + text + text", "text.matches('(a|b)*c')",
		"has(doc.meta.k) ? doc.meta : items", "dyn(none).x", "size(${text}) / 0", "type(score) == double",
		"timestamp('2020-01-01T00:00:00Z') < timestamp('2021-01-01T00:00:00Z')", "duration('1h') > duration('1m')",
		"b'abc' == b'abc'", "[1, 2, 3].map(x, x * x)", "{'a': [1u, 2.0, 'x', null, true]}", "${", "${a..b} == 1",
		"${ in } == 'yes'", "_p0 == ${name}", "@result", strings.Repeat("(", 70) + "1" + strings.Repeat(")", 70),
		strings.Repeat("score + ", 600) + "1.0", strings.Repeat("x", 4097),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, source string) {
		checkCondition(t, source)
	})
}

func checkCondition(t *testing.T, source string) {
	t.Helper()
	limits := DefaultLimits()
	c, err := compileCondition(source, limits)
	if err != nil {
		if c != nil {
			t.Fatalf("compileCondition returned a condition and an error")
		}
		if len(source) > limits.ConditionBytes && !errors.As(err, new(*LimitError)) {
			t.Fatalf("a condition of %d bytes was refused with %T, not a *LimitError", len(source), err)
		}
		return
	}
	if len(source) > limits.ConditionBytes {
		t.Fatalf("a condition of %d bytes compiled", len(source))
	}
	began := time.Now()
	v, err := c.eval(context.Background(), fuzzConditionVars)
	if took := time.Since(began); took > conditionEvalBound {
		t.Fatalf("evaluating %q took %s", source, took)
	}
	if err != nil {
		return
	}
	checkConditionValue(t, source, v)
	_ = BranchKey(v)
}

// checkConditionValue checks that a condition's value is what variables
// hold: nil, bool, string, a finite float64, or lists and maps of them.
func checkConditionValue(t *testing.T, source string, v any) {
	t.Helper()
	switch x := v.(type) {
	case nil, bool, string:
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			t.Fatalf("%q evaluated to %v", source, x)
		}
	case []any:
		for _, e := range x {
			checkConditionValue(t, source, e)
		}
	case map[string]any:
		for _, e := range x {
			checkConditionValue(t, source, e)
		}
	default:
		t.Fatalf("%q evaluated to a %T: %v", source, v, v)
	}
}
