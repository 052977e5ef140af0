package workflow

import (
	"regexp"
	"regexp/syntax"
	"strings"
	"testing"

	"cel.dev/cel-go/common/types"
	"github.com/stretchr/testify/require"
)

// compiledSize is len(prog.Inst) of the program Go's regexp runs.
func compiledSize(t testing.TB, pattern string) int {
	t.Helper()
	re, err := syntax.Parse(pattern, syntax.Perl)
	require.NoError(t, err, pattern)
	prog, err := syntax.Compile(re.Simplify())
	require.NoError(t, err, pattern)
	return len(prog.Inst)
}

// A pattern's size is what it compiles to, counted before compiling: the
// exact number of instructions, or a few more for its stars.
func TestPatternSize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pattern        string
		size, compiled int64
	}{
		{"", 3, 3},
		{"a", 3, 3},
		{"abc", 5, 5},
		{"^[a-z]+$", 6, 6},
		{`^\d{3}-\d{3}-\d{4}$`, 16, 16},
		{`^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$`, 13, 13},
		{"(?i)hello", 7, 7},
		{"(a|b|c)*", 7, 6}, // a star of something that is never empty is one instruction
		{"a{100}x", 103, 103},
		{"a{1000}x", 1003, 1003},
		{"a{1000}a{1000}a{1000}a{1000}a{1000}x", 5003, 5003},
		{"(?:a{30}){30}", 902, 902},
	} {
		parsed, err := syntax.Parse(tc.pattern, syntax.Perl)
		require.NoError(t, err)
		require.Equal(t, tc.size, programBound(parsed), tc.pattern)
		require.Equal(t, int(tc.compiled), compiledSize(t, tc.pattern), tc.pattern)
	}

	limits := DefaultLimits()
	size, err := patternSize("a{100}x", limits)
	require.NoError(t, err)
	require.EqualValues(t, 103, size)
	size, err = patternSize("a{998}", limits)
	require.NoError(t, err, "1,000 instructions is within the limit")
	require.EqualValues(t, 1000, size)
	for _, p := range []string{"a{999}", "a{1000}x", "(?:a{999}){1}b"} {
		_, err = patternSize(p, limits)
		var le *LimitError
		require.ErrorAs(t, err, &le, p)
		require.Equal(t, "limits.regexProgramSize", le.Limit)
		require.EqualValues(t, 1000, le.Max)
	}
	_, err = patternSize(strings.Repeat("a", 4097), limits)
	require.ErrorContains(t, err, "limits.conditionBytes")
	_, err = patternSize("(?:a{1000}){1000}", limits)
	require.ErrorContains(t, err, "invalid repeat count", "Go refuses repetitions nested past 1,000")
}

// A call costs size × (characters + 1 + regexCompileCost), and one over
// limits.conditionCost neither compiles nor matches.
func TestRegexCallCost(t *testing.T) {
	t.Parallel()
	require.EqualValues(t, 1003*(900_000+11), callCost(1003, 900_000))
	require.EqualValues(t, 6*11, callCost(6, 0))
	require.EqualValues(t, ^uint64(0), callCost(1000, ^uint64(0)), "it saturates")

	limits := DefaultLimits()
	m := &matcher{constants: map[string]int64{"a{100}x": 103}, limits: limits}
	// 103 × (9,697 + 11) = 999,924: within 1,000,000; one more character
	// and it is not.
	fits := strings.Repeat("a", 9697)
	require.Equal(t, types.False, m.match(types.String(fits), types.String("a{100}x")))
	got := m.match(types.String(fits+"a"), types.String("a{100}x"))
	require.True(t, types.IsError(got))
	require.ErrorIs(t, got.(*types.Err), ErrConditionCost)
	require.ErrorContains(t, got.(*types.Err), "costs 1000027, over 1000000")
	// Characters, not bytes: CEL's size of a string.
	require.Equal(t, types.False, m.match(types.String(strings.Repeat("é", 9697)), types.String("a{100}x")))

	// A pattern that is not a constant is checked first.
	got = m.match(types.String("aaa"), types.String("a{1000}x"))
	require.ErrorContains(t, got.(*types.Err), "limits.regexProgramSize")
	require.Equal(t, types.True, m.match(types.String("aaa"), types.String("^a+$")))
}

// BenchmarkRegexCost measures what regexCompileCost and the cost of a step
// stand for: compiling a pattern, in ns per instruction, and matching the
// worst case (RE2's NFA), in ns per instruction and character.
func BenchmarkRegexCost(b *testing.B) {
	b.Run("compile", func(b *testing.B) {
		for b.Loop() {
			regexp.MustCompile("a{1000}x")
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1003, "ns/inst")
	})
	b.Run("match", func(b *testing.B) {
		re, s := regexp.MustCompile("a{100}x"), strings.Repeat("a", 100_000)
		for b.Loop() {
			re.MatchString(s)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(103*100_000), "ns/inst×char")
	})
}
