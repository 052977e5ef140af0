package workflow

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"strconv"
	"unicode/utf8"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/checker"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/overloads"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
)

// Regular expressions. CEL's matches() runs Go's regexp (RE2): its time is
// linear in the input, but the factor is the size of the pattern's
// compiled program, and a match cannot be interrupted once it has begun.
// cel-go charges a pattern by the length of its text, so 'a{1000}x' (eight
// characters, a thousand instructions) matched against 900,000 bytes costs
// 180,000 units by its count and ran for 20 s. Baton replaces matches()
// with its own, which charges what a match costs before it begins:
//
//   - A pattern's size is the number of instructions of its compiled
//     program, as regexp/syntax's parser counts them before compiling it
//     (programBound): 'a{1000}x' is 1,003. It is at most
//     limits.regexProgramSize, and its text at most limits.conditionBytes
//     long. A constant pattern over either is refused when the definition
//     is stored; one computed while the condition runs fails the node
//     before it is compiled.
//   - A call costs size × (characters + 1 + regexCompileCost) units: the
//     steps of RE2's automaton over the string in the worst case, and
//     compiling the pattern, which every call does.
//
// The cost estimator charges the same when the definition is stored (on the
// longest strings the variables allow, and for a computed pattern the
// largest size allowed) and before each evaluation (on the variables it
// reads), and the function itself checks its call's cost against
// limits.conditionCost before it compiles and matches, so no match runs that
// its budget does not cover. Nothing compiled is kept between calls: a
// stored definition holds each constant pattern's size, not its program.

// regexCompileCost is what compiling a pattern costs, in units per
// instruction: compiling takes about ten times as long per instruction as
// one step of matching does per instruction and character
// (BenchmarkRegexCost).
const regexCompileCost = 10

// patternSize checks a regular expression's text against
// limits.conditionBytes and the size of its program against
// limits.regexProgramSize, and returns the size. Over a limit, the error is
// a *LimitError. It parses the pattern but does not compile it.
func patternSize(source string, limits Limits) (int64, error) {
	if len(source) > limits.ConditionBytes {
		return 0, &LimitError{Field: "regular expression " + quotePattern(source) + " length", Limit: "limits.conditionBytes",
			Max: int64(limits.ConditionBytes), Got: int64(len(source))}
	}
	parsed, err := syntax.Parse(source, syntax.Perl)
	if err != nil {
		return 0, fmt.Errorf("regular expression %s: %w", quotePattern(source), err)
	}
	size := programBound(parsed)
	if size > int64(limits.RegexProgramSize) {
		return 0, &LimitError{Field: "regular expression " + quotePattern(source) + " compiled size (instructions)",
			Limit: "limits.regexProgramSize", Max: int64(limits.RegexProgramSize), Got: size}
	}
	return size, nil
}

// programBound is the number of instructions a parsed regular expression
// compiles to, or a few more: the count regexp/syntax's parser makes to
// refuse expressions too large to compile (calcSize in parse.go, which
// counts two for every star where the compiler may emit one), plus the two
// instructions every program has (fail and match). It is never less than
// len(prog.Inst) of syntax.Compile(re.Simplify()) (FuzzConditionMatches
// checks it), and it costs time linear in the parsed expression, whatever
// that expands to.
func programBound(re *syntax.Regexp) int64 {
	return 2 + subBound(re)
}

// subBound is calcSize of regexp/syntax's parse.go. It cannot overflow:
// the parser refuses repetitions nested more than 1,000 times in all.
func subBound(re *syntax.Regexp) int64 {
	var size int64
	switch re.Op {
	case syntax.OpLiteral:
		size = int64(len(re.Rune))
	case syntax.OpCapture, syntax.OpStar:
		size = 2 + subBound(re.Sub[0]) // a star may be one or two
	case syntax.OpPlus, syntax.OpQuest:
		size = 1 + subBound(re.Sub[0])
	case syntax.OpConcat, syntax.OpAlternate:
		for _, sub := range re.Sub {
			size += subBound(sub)
		}
		if re.Op == syntax.OpAlternate && len(re.Sub) > 1 {
			size += int64(len(re.Sub)) - 1
		}
	case syntax.OpRepeat:
		sub := subBound(re.Sub[0])
		switch {
		case re.Max == -1 && re.Min == 0:
			size = 2 + sub // x*
		case re.Max == -1:
			size = 1 + int64(re.Min)*sub // xx…x+
		default:
			size = int64(re.Max)*sub + int64(re.Max-re.Min) // xx(x(x)?)?
		}
	}
	return max(1, size)
}

// quotePattern quotes a pattern for an error message, its first 64 bytes.
func quotePattern(source string) string {
	if len(source) <= 64 {
		return strconv.Quote(source)
	}
	cut := 64
	for cut > 0 && !utf8.RuneStart(source[cut]) {
		cut--
	}
	return strconv.Quote(source[:cut]) + "…"
}

// callCost is what one matches() call costs, in CEL cost units, for a
// pattern of size instructions and a string of n characters.
func callCost(size, n uint64) uint64 {
	return cost.SafeMultiply(size, cost.SafeAdd(n, 1+regexCompileCost))
}

// matcher is one condition's matches(): the sizes of its constant
// patterns, known since the condition was compiled, and the limits it
// checks other patterns and every call against.
type matcher struct {
	constants map[string]int64
	limits    Limits
}

// constantPatterns returns the sizes of the constant patterns of a parsed
// condition's matches() calls, refusing those over the limits.
func constantPatterns(parsed *cel.Ast, limits Limits) (map[string]int64, error) {
	sizes := map[string]int64{}
	var firstErr error
	ast.PostOrderVisit(parsed.NativeRep().Expr(), ast.NewExprVisitor(func(e ast.Expr) {
		source, ok := constantPattern(e)
		if !ok || firstErr != nil {
			return
		}
		if _, done := sizes[source]; done {
			return
		}
		size, err := patternSize(source, limits)
		if err != nil {
			firstErr = err
			return
		}
		sizes[source] = size
	}))
	if firstErr != nil {
		return nil, firstErr
	}
	return sizes, nil
}

// constantPattern returns the pattern of a matches() call when it is a
// string literal.
func constantPattern(e ast.Expr) (string, bool) {
	if e.Kind() != ast.CallKind || e.AsCall().FunctionName() != overloads.Matches {
		return "", false
	}
	arg := patternArg(e.AsCall())
	if arg == nil || arg.Kind() != ast.LiteralKind {
		return "", false
	}
	s, ok := arg.AsLiteral().(types.String)
	return string(s), ok
}

// patternArg is the pattern argument of a matches() call: s.matches(p) or
// matches(s, p).
func patternArg(call ast.CallExpr) ast.Expr {
	args := call.Args()
	switch {
	case call.IsMemberFunction() && len(args) == 1:
		return args[0]
	case !call.IsMemberFunction() && len(args) == 2:
		return args[1]
	}
	return nil
}

// function declares matches() in both of CEL's forms, bound to m.
func (m *matcher) function() cel.EnvOption {
	return cel.Function(overloads.Matches,
		cel.Overload(overloads.Matches, []*cel.Type{cel.StringType, cel.StringType}, cel.BoolType),
		cel.MemberOverload(overloads.MatchesString, []*cel.Type{cel.StringType, cel.StringType}, cel.BoolType),
		cel.SingletonBinaryBinding(m.match))
}

// match reports whether str matches pat, unless the pattern is over its
// limits or the call would cost more than limits.conditionCost: then it
// neither compiles nor matches.
func (m *matcher) match(str, pat ref.Val) ref.Val {
	s, ok := str.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(str)
	}
	source, ok := pat.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(pat)
	}
	size, constant := m.constants[string(source)]
	if !constant {
		var err error
		if size, err = patternSize(string(source), m.limits); err != nil {
			return types.WrapErr(err)
		}
	}
	n := uint64(utf8.RuneCountInString(string(s)))
	if charge := callCost(uint64(size), n); charge > m.limits.ConditionCost {
		return types.WrapErr(fmt.Errorf("%w: matching %s (%d instructions) against %d characters costs %d, over %d",
			ErrConditionCost, quotePattern(string(source)), size, n, charge, m.limits.ConditionCost))
	}
	re, err := regexp.Compile(string(source))
	if err != nil {
		return types.WrapErr(fmt.Errorf("regular expression %s: %w", quotePattern(string(source)), err))
	}
	return types.Bool(re.MatchString(string(s)))
}

// regexCost is the part of a cost estimator that charges matches() as
// matcher.match does: a pattern by its size when it is known before the
// condition runs, and by the largest size limits.regexProgramSize allows
// when it is not.
type regexCost struct {
	constants map[string]int64
	limits    Limits
}

// callCost estimates a matches() call, and returns nil for any other
// function. sizeOf gives a string's size; text, when not nil, gives the
// value of a pattern read from the variables.
func (r regexCost) callCost(sizeOf func(checker.AstNode) checker.SizeEstimate, text func(checker.AstNode) (string, bool),
	overloadID string, target *checker.AstNode, args []checker.AstNode,
) *checker.CallEstimate {
	var str, pat checker.AstNode
	switch {
	case overloadID == overloads.MatchesString && target != nil && len(args) == 1:
		str, pat = *target, args[0]
	case overloadID == overloads.Matches && target == nil && len(args) == 2:
		str, pat = args[0], args[1]
	default:
		return nil
	}
	size := r.patternSize(pat, text)
	n := sizeOf(str)
	return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: callCost(size, n.Min), Max: callCost(size, n.Max)}}
}

// patternSize is the size of a call's pattern, or the largest allowed when
// it is not known or not within the limits (the call fails then).
func (r regexCost) patternSize(pat checker.AstNode, text func(checker.AstNode) (string, bool)) uint64 {
	if pat.Expr().Kind() == ast.LiteralKind {
		if source, ok := pat.Expr().AsLiteral().(types.String); ok {
			if size, found := r.constants[string(source)]; found {
				return uint64(size)
			}
		}
	}
	if text != nil {
		if source, ok := text(pat); ok {
			if size, err := patternSize(source, r.limits); err == nil {
				return uint64(size)
			}
		}
	}
	return uint64(r.limits.RegexProgramSize)
}

// nodeSize is the size the cost estimator computed for a node, or the
// estimator's own bound when it computed none.
func nodeSize(fallback func(checker.AstNode) *checker.SizeEstimate) func(checker.AstNode) checker.SizeEstimate {
	return func(node checker.AstNode) checker.SizeEstimate {
		if sz := node.ComputedSize(); sz != nil {
			return *sz
		}
		if sz := fallback(node); sz != nil {
			return *sz
		}
		return checker.UnknownSizeEstimate()
	}
}
