package engine

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"
)

// dollarPath matches ${a.b} inside a condition: the variable path a.b.
var dollarPath = regexp.MustCompile(`\$\{\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)\s*\}`)

// condition is a compiled decision condition.
type condition struct {
	source  string
	program *vm.Program
}

// optionalMembers makes every member access nil-safe, so a missing variable
// or field is nil rather than an error.
type optionalMembers struct{}

func (optionalMembers) Visit(node *ast.Node) {
	if m, ok := (*node).(*ast.MemberNode); ok && !m.Method && !m.Optional {
		m.Optional = true
		// An optional member needs a chain around it, as a?.b gets from the
		// parser, so that a nil short-circuits to nil.
		ast.Patch(node, &ast.ChainNode{Node: m})
	}
}

// compileCondition compiles a condition with expr-lang/expr. ${a.b} names the
// variable path a.b; bare names are variables too. There is no typed
// environment: a missing variable is nil.
func compileCondition(source string) (*condition, error) {
	rewritten := dollarPath.ReplaceAllString(source, "$1")
	if strings.Contains(rewritten, "${") {
		return nil, fmt.Errorf("malformed ${…} placeholder in %q", source)
	}
	program, err := expr.Compile(rewritten, expr.AllowUndefinedVariables(), expr.Patch(optionalMembers{}))
	if err != nil {
		return nil, err
	}
	return &condition{source: source, program: program}, nil
}

// eval runs the condition against the variables.
func (c *condition) eval(vars Variables) (any, error) {
	out, err := expr.Run(c.program, map[string]any(vars))
	if err != nil {
		return nil, fmt.Errorf("evaluating %q: %w", c.source, err)
	}
	return out, nil
}

// branchKey turns a condition's value into the key of a decision's branches.
func branchKey(v any) string {
	switch t := v.(type) {
	case bool:
		if t {
			return "true"
		}
		return "false"
	case nil:
		return "false"
	default:
		return renderText(t)
	}
}
