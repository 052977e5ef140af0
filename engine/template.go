package engine

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// placeholder matches {{path}} and ${path}.
var placeholder = regexp.MustCompile(`\{\{\s*([^{}]+?)\s*\}\}|\$\{\s*([^{}]+?)\s*\}`)

func isTemplate(s string) bool { return placeholder.MatchString(s) }

// Variables are an execution's accumulated variables.
type Variables map[string]any

// Lookup resolves a dotted path ("document.language", "items.0.name").
func (v Variables) Lookup(path string) (any, bool) {
	var cur any = map[string]any(v)
	for _, part := range strings.Split(strings.TrimSpace(path), ".") {
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[part]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// interpolation renders templates against variables and remembers the
// placeholders that named no variable.
type interpolation struct {
	vars    Variables
	missing []string
}

// value interpolates every string inside v. A string that is exactly one
// placeholder keeps the JSON type of the variable it names.
func (in *interpolation) value(v any) any {
	switch t := v.(type) {
	case string:
		return in.str(t)
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = in.value(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = in.value(x)
		}
		return out
	default:
		return v
	}
}

func (in *interpolation) str(s string) any {
	if m := placeholder.FindStringSubmatchIndex(s); m != nil && m[0] == 0 && m[1] == len(s) {
		path := submatch(s, m)
		if val, ok := in.vars.Lookup(path); ok {
			return val
		}
		in.missing = append(in.missing, path)
		return ""
	}
	return in.text(s)
}

// text interpolates s as text: lists of scalars join with ", ", objects
// render as JSON, a missing variable renders empty.
func (in *interpolation) text(s string) string {
	return placeholder.ReplaceAllStringFunc(s, func(match string) string {
		m := placeholder.FindStringSubmatchIndex(match)
		path := submatch(match, m)
		val, ok := in.vars.Lookup(path)
		if !ok {
			in.missing = append(in.missing, path)
			return ""
		}
		return renderText(val)
	})
}

func submatch(s string, m []int) string {
	if m[2] >= 0 {
		return s[m[2]:m[3]]
	}
	return s[m[4]:m[5]]
}

func renderText(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return t
	case bool:
		return strconv.FormatBool(t)
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64)
	case json.Number:
		return t.String()
	case []any:
		parts := make([]string, 0, len(t))
		for _, x := range t {
			switch x.(type) {
			case map[string]any, []any:
				b, _ := json.Marshal(t)
				return string(b)
			}
			parts = append(parts, renderText(x))
		}
		return strings.Join(parts, ", ")
	default:
		b, err := json.Marshal(t)
		if err != nil {
			return fmt.Sprint(t)
		}
		return string(b)
	}
}
