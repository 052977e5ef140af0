package workflow

import (
	"context"
	"errors"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// FuzzConditionMatches fuzzes matches() with a pattern and a string, in a
// condition whose pattern is a constant (`${s}.matches('…')`) and in one
// whose pattern is a variable (`'…'.matches(${p})`). It checks that:
//   - programBound is never less than what the pattern compiles to, so the
//     size the limits are checked against is never too small;
//   - a condition compiles only when its pattern compiles and is within
//     limits.regexProgramSize, and any refusal is a *LimitError or the
//     pattern's own error;
//   - an evaluation returns within conditionEvalBound, fails only when the
//     pattern is invalid or over a limit or the call's cost is, and
//     otherwise answers what Go's regexp answers.
func FuzzConditionMatches(f *testing.F) {
	for _, seed := range [][2]string{
		{"a{1000}x", strings.Repeat("a", 200)},
		{"a{1000}a{1000}a{1000}a{1000}a{1000}x", "aaaa"},
		{"a{100}x", strings.Repeat("a", 2000)},
		{"a{998}", strings.Repeat("a", 998)},
		{"a{500}x", "ab"},
		{"^[a-z]+-[0-9]+$", "abc-123"},
		{`^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$`, "ana@example.com"},
		{"(?i)HOLA", "hola, ¿qué tal?"},
		{"(a|b|c)*x", "abcabcx"},
		{"(?:(?:a*)+)*b", strings.Repeat("a", 30)},
		{`\p{L}+\s\d*`, "ñandú 42"},
		{"[^\\x00-\\x{10FFFF}]{1000}", "x"},
		{"(?:){1000}", ""},
		{"(", "("},
		{"(?:a{1000}){1000}", "a"},
		{"\\", "\\"},
		{"${p}", "${p}"},
		{"'", "'"},
		{"\x00|\n", "\x00"},
		{"\xff", "\xff"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, pattern, subject string) {
		checkPatternBound(t, pattern)
		if quoted, ok := celString(pattern); ok {
			checkMatches(t, "${s}.matches("+quoted+")", Variables{"s": subject}, pattern, subject)
		}
		if quoted, ok := celString(subject); ok {
			checkMatches(t, quoted+".matches(${p})", Variables{"p": pattern}, pattern, subject)
		}
	})
}

// checkPatternBound checks that programBound is at least the compiled size
// of a pattern Go parses (up to a size that compiles quickly).
func checkPatternBound(t *testing.T, pattern string) {
	t.Helper()
	parsed, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return
	}
	bound := programBound(parsed)
	if bound > 100_000 {
		return
	}
	prog, err := syntax.Compile(parsed.Simplify())
	require.NoError(t, err, "%q parses but does not compile", pattern)
	require.GreaterOrEqual(t, bound, int64(len(prog.Inst)), "%q", pattern)
}

// celString quotes s as a CEL string literal, when it is valid UTF-8 and
// holds no ${…} (which a condition's text takes for a variable path).
func celString(s string) (string, bool) {
	if !utf8.ValidString(s) || strings.Contains(s, "${") {
		return "", false
	}
	return strconv.Quote(s), true
}

// expectedMatch is what Go's regexp says of a pattern and a string: the
// pattern's error, its size, and, when the match is within limit, whether
// the string matches it.
type expectedMatch struct {
	err     error
	size    int64
	matches bool
}

func expectMatch(pattern, subject string, limit uint64) expectedMatch {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return expectedMatch{err: err}
	}
	parsed, _ := syntax.Parse(pattern, syntax.Perl)
	want := expectedMatch{size: programBound(parsed)}
	if callCost(uint64(want.size), uint64(len(subject))) <= limit {
		want.matches = re.MatchString(subject)
	}
	return want
}

func checkMatches(t *testing.T, source string, vars Variables, pattern, subject string) {
	t.Helper()
	limits := DefaultLimits()
	want := expectMatch(pattern, subject, limits.ConditionCost)
	overSize := want.err == nil && (want.size > int64(limits.RegexProgramSize) || len(pattern) > limits.ConditionBytes)
	c, err := compileCondition(source, limits)
	if err != nil {
		if want.err == nil && !overSize && !errors.As(err, new(*LimitError)) {
			t.Fatalf("%s was refused with %v", source, err)
		}
		return
	}
	_, constant := vars["s"]
	if constant {
		require.NoError(t, want.err, "%s compiled", source)
		require.False(t, overSize, "%s compiled", source)
	}
	began := time.Now()
	got, err := c.eval(context.Background(), vars)
	if took := time.Since(began); took > conditionEvalBound {
		t.Fatalf("evaluating %s took %s", source, took)
	}
	// Within the limits and the cost (counting bytes, at least as many
	// as characters, and some room for what the condition costs besides
	// the call), it answers as regexp does.
	fits := want.err == nil && !overSize && callCost(uint64(want.size), uint64(len(subject)))+10 < limits.ConditionCost
	switch {
	case err == nil:
		require.NoError(t, want.err, "%s evaluated", source)
		require.False(t, overSize, "%s evaluated", source)
		require.Equal(t, want.matches, got, "%s on %q", source, subject)
	case fits:
		t.Fatalf("%s on %q failed: %v", source, subject, err)
	case want.err == nil && !overSize:
		require.ErrorIs(t, err, ErrConditionCost, "%s on %q", source, subject)
	}
}
