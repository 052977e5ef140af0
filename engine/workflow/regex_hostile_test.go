package workflow

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A regular expression is charged by what it compiles to, not by the
// length of its text: patterns that compile to more instructions than
// limits.regexProgramSize, or whose matches would cost over the limit on
// the longest strings the variables allow, are refused when the definition
// is stored.
func TestRegexConditionsAreRefusedWhenStored(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ source, limit string }{
		// Eight characters, 1,003 instructions.
		{"${s}.matches('a{1000}x')", "limits.regexProgramSize"},
		{"${s}.matches('a{1000}a{1000}a{1000}a{1000}a{1000}x')", "limits.regexProgramSize"},
		{"matches('short', 'a{1000}a{1000}a{1000}a{1000}a{1000}x')", "limits.regexProgramSize"},
		{"['x', 'y'].exists(v, v.matches('(?:abcdefghij){200}'))", "limits.regexProgramSize"},
		// Within the size, but 503 instructions times half a megabyte of
		// string is over 100 × limits.conditionCost.
		{"${s}.matches('a{500}x')", "limits.conditionCost × 100"},
		{"s.matches('[a-z]{300}')", "limits.conditionCost × 100"},
	} {
		_, err := compileCondition(tc.source, DefaultLimits())
		var le *LimitError
		require.ErrorAs(t, err, &le, tc.source)
		require.Equal(t, tc.limit, le.Limit, tc.source)
		require.ErrorContains(t, err, tc.limit, tc.source)
	}
	_, err := compileCondition("${s}.matches('(')", DefaultLimits())
	require.ErrorContains(t, err, "missing closing )", "a pattern that does not compile is refused when stored")

	// What stays within the limits compiles and gives RE2's answers.
	vars := Variables{"s": "abc-123", "doc": map[string]any{"id": "INE-42"}}
	for source, want := range map[string]bool{
		"${s}.matches('^[a-z]+-[0-9]+$')":       true,
		"matches(${doc.id}, '^[A-Z]+-\\\\d+$')": true,
		"${s}.matches('a{100}x')":               false,
		"${s}.matches('(?i)ABC')":               true,
	} {
		c, err := compileCondition(source, DefaultLimits())
		require.NoError(t, err, source)
		got, err := c.eval(context.Background(), vars)
		require.NoError(t, err, source)
		require.Equal(t, want, got, source)
	}
}

// A pattern accepted when stored is charged again on the string it meets:
// 103 instructions against 900,000 characters is 93 million units, and the
// condition fails without matching (it took 2.7 s to match, unstoppable).
func TestRegexConditionIsCheckedBeforeMatching(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 900_000)
	c, err := compileCondition("${s}.matches('a{100}x')", DefaultLimits())
	require.NoError(t, err)
	_, err = c.eval(context.Background(), Variables{"s": long})
	require.ErrorIs(t, err, ErrConditionCost)
	require.ErrorContains(t, err, "limits.conditionCost")

	// The function itself refuses a match over the limit, whatever the
	// estimate before it said: here the program runs with no estimate.
	_, _, err = c.program.ContextEval(context.Background(), map[string]any{"_p0": long})
	require.ErrorIs(t, err, ErrConditionCost)
	require.ErrorContains(t, err, "against 900000 characters")
	got, _, err := c.program.ContextEval(context.Background(), map[string]any{"_p0": "aax"})
	require.NoError(t, err)
	require.Equal(t, false, got.Value())
}

// A pattern that comes from a variable is checked when the condition meets
// it: over limits.regexProgramSize it is not compiled, and its call is
// charged like any other.
func TestComputedRegexIsCheckedWhenItRuns(t *testing.T) {
	t.Parallel()
	c, err := compileCondition("'aaaa'.matches(${p})", DefaultLimits())
	require.NoError(t, err)
	got, err := c.eval(context.Background(), Variables{"p": "^a+$"})
	require.NoError(t, err)
	require.Equal(t, true, got)

	for _, p := range []string{"a{1000}x", strings.Repeat("(?:abcdefghij)", 200)} {
		_, err = c.eval(context.Background(), Variables{"p": p})
		var le *LimitError
		require.ErrorAs(t, err, &le, p)
		require.Equal(t, "limits.regexProgramSize", le.Limit, p)
	}
	_, err = c.eval(context.Background(), Variables{"p": strings.Repeat("a", 5000)})
	require.ErrorContains(t, err, "limits.conditionBytes", "a pattern is no longer than a condition")
	_, err = c.eval(context.Background(), Variables{"p": "("})
	require.ErrorContains(t, err, "missing closing )")

	// The call is charged by the pattern it meets: against 1,500
	// characters, a short pattern is cheap and one of 903 instructions is
	// 1.4 million units, over the limit.
	c, err = compileCondition("'"+strings.Repeat("a", 1500)+"'.matches(${p})", DefaultLimits())
	require.NoError(t, err)
	got, err = c.eval(context.Background(), Variables{"p": "^a"})
	require.NoError(t, err)
	require.Equal(t, true, got)
	_, err = c.eval(context.Background(), Variables{"p": "a{900}x"})
	require.ErrorIs(t, err, ErrConditionCost)
}
