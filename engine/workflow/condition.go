package workflow

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/checker"
	"cel.dev/cel-go/common"
	"cel.dev/cel-go/common/ast"
	celenv "cel.dev/cel-go/common/env"
	"cel.dev/cel-go/common/overloads"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/parser"
	"google.golang.org/protobuf/types/known/structpb"
)

// Conditions are CEL expressions (cel.dev/cel-go), the language Kubernetes
// and others use for expressions their users write: it has no loops but its
// bounded macros, a cost model that can be estimated before a condition runs,
// and a cost limit enforced while it runs.
//
// A condition may name variables two ways:
//   - ${a.b.0.c} is the variable path a.b.0.c, resolved as templates resolve
//     it: a missing step gives null, list indexes are numbers, and any name
//     works, even one CEL reserves ("${in}", "${type}").
//   - a bare name, such as score in `score > 5`, is the top-level variable
//     of that name, null when unset; CEL's own field access applies to it.
//
// Variables hold JSON values, so their numbers are doubles: they compare
// with integer literals (`${score} > 5`), and arithmetic mixes them with
// double literals (`${score} * 1.5`). `nil` is accepted for null and
// len(x) for size(x), as the expressions of earlier versions wrote them.

// dollarPath matches ${a.b} inside a condition: the variable path a.b.
var dollarPath = regexp.MustCompile(`\$\{\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)\s*\}`)

const (
	// pathPrefix names the identifiers ${…} paths are rewritten to.
	pathPrefix = "_p"
	// evalDeadline stops an evaluation the cost estimate let through: a
	// second guard, not reached by a condition within its cost.
	evalDeadline = 500 * time.Millisecond
	// interruptEvery is how many loop turns pass between two looks at the
	// deadline.
	interruptEvery = 100
	// parserRecursion bounds how deeply a condition may nest.
	parserRecursion = 64
	// estimateFactor is how far over limits.conditionCost a condition's
	// estimated worst case may be when its definition is stored. The
	// estimate takes every list to be as long as the variables allow, so
	// one pass over a list passes and a pass inside a pass (quadratic) does
	// not; the run-time limit stops what passes and costs too much.
	estimateFactor = 100
)

// ErrConditionCost says a condition would cost, or did cost, more than its
// limit allows.
var ErrConditionCost = errors.New("condition is over its cost limit (limits.conditionCost)")

// condition is a compiled decision condition.
type condition struct {
	source  string
	program cel.Program
	// paths are the variable paths of ${…} placeholders, by identifier.
	paths map[string]string
	// names are the bare top-level names the condition reads.
	names []string
	// env, checked and limit estimate the cost of each evaluation, unless
	// costChecked says its worst case on any variables is within limit.
	env         *cel.Env
	checked     *cel.Ast
	limit       uint64
	costChecked bool
	// regex charges the condition's matches() calls in its estimates.
	regex regexCost
}

// baseEnv is the environment every condition compiles in before its own
// names are declared: CEL's standard library but for matches(), which each
// condition declares with its own limits (regex.go).
var baseEnv = func() *cel.Env {
	env, err := cel.NewCustomEnv(
		cel.StdLib(cel.StdLibSubset(celenv.NewLibrarySubset().AddExcludedFunctions(celenv.NewFunction(overloads.Matches)))),
		cel.CrossTypeNumericComparisons(true),
		cel.ParserRecursionLimit(parserRecursion),
		cel.Macros(cel.GlobalMacro("len", 1, lenMacro)),
	)
	if err != nil {
		panic(fmt.Sprintf("building the condition environment: %v", err))
	}
	return env
}()

// lenMacro turns len(x) into size(x).
func lenMacro(eh parser.ExprHelper, _ ast.Expr, args []ast.Expr) (ast.Expr, *common.Error) {
	return eh.NewCall("size", args...), nil
}

// compileCondition compiles a condition and checks that its estimated worst
// case costs at most limits.ConditionCost.
func compileCondition(source string, limits Limits) (*condition, error) {
	if len(source) > limits.ConditionBytes {
		return nil, &LimitError{Field: "condition length", Limit: "limits.conditionBytes", Max: int64(limits.ConditionBytes), Got: int64(len(source))}
	}
	c := &condition{source: source, paths: map[string]string{}}
	ids := map[string]string{}
	rewritten := dollarPath.ReplaceAllStringFunc(source, func(m string) string {
		path := dollarPath.FindStringSubmatch(m)[1]
		id, ok := ids[path]
		if !ok {
			id = pathPrefix + strconv.Itoa(len(ids))
			ids[path] = id
			c.paths[id] = path
		}
		return id
	})
	if strings.Contains(rewritten, "${") {
		return nil, fmt.Errorf("malformed ${…} placeholder in %q", source)
	}
	parsed, iss := baseEnv.Parse(rewritten)
	if iss.Err() != nil {
		return nil, celError(iss.Err(), ids)
	}
	constants, err := constantPatterns(parsed, limits)
	if err != nil {
		return nil, err
	}
	m := &matcher{constants: constants, limits: limits}
	c.regex = regexCost{constants: constants, limits: limits}
	opts := []cel.EnvOption{m.function()}
	for _, name := range freeNames(parsed) {
		opts = append(opts, cel.Variable(name, cel.DynType))
		if _, isPath := c.paths[name]; !isPath {
			c.names = append(c.names, name)
		}
	}
	env, err := baseEnv.Extend(opts...)
	if err != nil {
		return nil, fmt.Errorf("declaring the condition's variables: %w", err)
	}
	checked, iss := env.Check(parsed)
	if iss.Err() != nil {
		return nil, celError(iss.Err(), ids)
	}
	est, err := env.EstimateCost(checked, sizeBound{max: uint64(limits.VariablesBytes / 2), regex: c.regex})
	if err != nil {
		return nil, fmt.Errorf("estimating the condition's cost: %w", err)
	}
	if bound := limits.ConditionCost * estimateFactor; est.Max > bound {
		return nil, &LimitError{Field: "condition's estimated worst-case cost", Limit: "limits.conditionCost × 100", Max: clampInt64(bound), Got: clampInt64(est.Max)}
	}
	c.env, c.checked, c.limit = env, checked, limits.ConditionCost
	// Within the limit on the largest variables there can be: no need to
	// estimate again on the real ones.
	c.costChecked = est.Max <= limits.ConditionCost
	c.program, err = env.Program(checked, cel.InterruptCheckFrequency(interruptEvery))
	if err != nil {
		return nil, fmt.Errorf("planning the condition: %w", err)
	}
	return c, nil
}

// freeNames returns the identifiers a parsed condition reads, sorted.
func freeNames(parsed *cel.Ast) []string {
	seen := map[string]bool{}
	ast.PostOrderVisit(parsed.NativeRep().Expr(), ast.NewExprVisitor(func(e ast.Expr) {
		if e.Kind() == ast.IdentKind {
			seen[e.AsIdent()] = true
		}
	}))
	names := make([]string, 0, len(seen))
	for n := range seen {
		// Comprehension accumulators are the parser's, not the tenant's.
		if !strings.HasPrefix(n, "@") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// celError puts the tenant's ${…} paths back into a CEL error message.
func celError(err error, ids map[string]string) error {
	msg := err.Error()
	for path, id := range ids {
		msg = strings.ReplaceAll(msg, id, "${"+path+"}")
	}
	return errors.New(msg)
}

// eval runs the condition against the variables. Its cost is estimated
// first from the sizes of the variables it reads, and a condition whose
// worst case on them is over limits.conditionCost does not run; while it
// runs, a deadline interrupts it at its next loop turn. (cel-go's own
// run-time cost tracker is not used: it costs time quadratic in a list's
// length, 11 s for one exists() over 100,000 items.) A value that is not
// finite (a division by zero) is an error.
func (c *condition) eval(ctx context.Context, vars Variables) (any, error) {
	act := make(map[string]any, len(c.paths)+len(c.names))
	for id, path := range c.paths {
		v, _ := vars.Lookup(path)
		act[id] = v
	}
	for _, name := range c.names {
		act[name] = vars[name] // nil when unset, and for `nil`
	}
	if !c.costChecked {
		est, err := c.env.EstimateCost(c.checked, newInputSizes(act, c.regex))
		if err != nil {
			return nil, fmt.Errorf("evaluating %q: estimating its cost: %w", c.source, err)
		}
		if est.Max > c.limit {
			return nil, fmt.Errorf("evaluating %q: %w: up to %d on these variables, over %d", c.source, ErrConditionCost, clampInt64(est.Max), c.limit)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, evalDeadline)
	defer cancel()
	out, _, err := c.program.ContextEval(ctx, act)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("evaluating %q: %w: it ran past %s", c.source, ErrConditionCost, evalDeadline)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("evaluating %q: %w", c.source, ctx.Err())
		}
		return nil, fmt.Errorf("evaluating %q: %w", c.source, err)
	}
	val, err := nativeValue(out)
	if err != nil {
		return nil, fmt.Errorf("evaluating %q: %w", c.source, err)
	}
	if !finite(val) {
		return nil, fmt.Errorf("evaluating %q: the value is not a finite number (a division by zero?)", c.source)
	}
	return val, nil
}

// inputSizes tells the cost estimator the sizes of the values a condition
// reads: exact for a variable or a field path into one, and the longest
// list, map or string anywhere in them for the rest.
type inputSizes struct {
	act     map[string]any
	longest uint64
	regex   regexCost
}

var _ checker.CostEstimator = (*inputSizes)(nil)

func newInputSizes(act map[string]any, regex regexCost) *inputSizes {
	s := &inputSizes{act: act, regex: regex}
	for _, v := range act {
		s.measure(v)
	}
	return s
}

func (s *inputSizes) measure(v any) {
	switch t := v.(type) {
	case string:
		s.longest = max(s.longest, uint64(len(t)))
	case []any:
		s.longest = max(s.longest, uint64(len(t)))
		for _, x := range t {
			s.measure(x)
		}
	case map[string]any:
		s.longest = max(s.longest, uint64(len(t)))
		for _, x := range t {
			s.measure(x)
		}
	}
}

// value returns the value a node reads when it is a variable or a field
// path into one.
func (s *inputSizes) value(node checker.AstNode) (any, bool) {
	path := node.Path()
	if len(path) == 0 {
		return nil, false
	}
	v, ok := s.act[path[0]]
	for _, field := range path[1:] {
		m, isMap := v.(map[string]any)
		if !ok || !isMap {
			return nil, false
		}
		v, ok = m[field]
	}
	return v, ok
}

func (s *inputSizes) EstimateSize(node checker.AstNode) *checker.SizeEstimate {
	v, _ := s.value(node)
	switch t := v.(type) {
	case string:
		return &checker.SizeEstimate{Min: uint64(len(t)), Max: uint64(len(t))}
	case []any:
		return &checker.SizeEstimate{Min: uint64(len(t)), Max: uint64(len(t))}
	case map[string]any:
		return &checker.SizeEstimate{Min: uint64(len(t)), Max: uint64(len(t))}
	}
	return &checker.SizeEstimate{Min: 0, Max: s.longest}
}

// EstimateCallCost charges matches() by its pattern: a constant one, or one
// read from a variable, by its size, and any other by the largest allowed.
func (s *inputSizes) EstimateCallCost(_, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	text := func(node checker.AstNode) (string, bool) {
		v, _ := s.value(node)
		str, ok := v.(string)
		return str, ok
	}
	return s.regex.callCost(nodeSize(s.EstimateSize), text, overloadID, target, args)
}

// nativeValue turns a CEL value into the JSON-like Go value variables hold.
func nativeValue(v ref.Val) (any, error) {
	switch t := v.(type) {
	case types.Bool:
		return bool(t), nil
	case types.String:
		return string(t), nil
	case types.Double:
		return float64(t), nil
	case types.Int:
		return float64(t), nil
	case types.Uint:
		return float64(t), nil
	case types.Null:
		return nil, nil
	}
	pb, err := v.ConvertToNative(reflect.TypeFor[*structpb.Value]())
	if err != nil {
		return nil, fmt.Errorf("a value of type %s cannot decide a branch", v.Type().(ref.Type).TypeName())
	}
	return pb.(*structpb.Value).AsInterface(), nil
}

// finite reports whether no number inside v is infinite or NaN.
func finite(v any) bool {
	switch t := v.(type) {
	case float64:
		return !math.IsInf(t, 0) && !math.IsNaN(t)
	case []any:
		for _, x := range t {
			if !finite(x) {
				return false
			}
		}
	case map[string]any:
		for _, x := range t {
			if !finite(x) {
				return false
			}
		}
	}
	return true
}

// sizeBound tells the cost estimator how large a variable may be: a list or
// map in the variables has at most half as many items as their JSON has
// bytes ("1,"), and a string no more characters than that.
type sizeBound struct {
	max   uint64
	regex regexCost
}

var _ checker.CostEstimator = sizeBound{}

func (b sizeBound) EstimateSize(checker.AstNode) *checker.SizeEstimate {
	return &checker.SizeEstimate{Min: 0, Max: b.max}
}

// EstimateCallCost charges matches() by its pattern: a constant one by its
// size, any other by the largest allowed.
func (b sizeBound) EstimateCallCost(_, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	return b.regex.callCost(nodeSize(b.EstimateSize), nil, overloadID, target, args)
}

func clampInt64(u uint64) int64 {
	if u > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(u)
}

// BranchKey turns a condition's value into the key of a decision's
// branches.
func BranchKey(v any) string {
	switch t := v.(type) {
	case bool:
		if t {
			return "true"
		}
		return "false"
	case nil:
		return "false"
	default:
		return RenderText(t)
	}
}
