package workflow

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// placeholder matches {{path}} and ${path}.
var placeholder = regexp.MustCompile(`\{\{\s*([^{}]+?)\s*\}\}|\$\{\s*([^{}]+?)\s*\}`)

// IsTemplate reports whether s holds a placeholder.
func IsTemplate(s string) bool { return placeholder.MatchString(s) }

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

// Interpolation renders templates against variables within a budget of
// bytes (limits.renderBytes), and remembers the placeholders that named no
// variable. Rendering stops when the budget runs out: it never builds more
// than the budget and one variable's text.
type Interpolation struct {
	vars Variables
	// Missing are the placeholders that named no variable, in order, each
	// once, at most ten.
	Missing []string
	budget  int
	limit   int
	err     error
}

// NewInterpolation renders against vars; everything it renders, over all
// calls, may add up to at most limit bytes.
func NewInterpolation(vars Variables, limit int) *Interpolation {
	return &Interpolation{vars: vars, budget: limit, limit: limit}
}

// maxMissing bounds how many missing placeholders an Interpolation
// remembers (each becomes a warning event), and maxMissingPath how much of
// each.
const (
	maxMissing     = 10
	maxMissingPath = 200
)

// missing remembers a placeholder that named no variable, once, and no more
// than maxMissing of them.
func (in *Interpolation) missing(path string) {
	if len(path) > maxMissingPath {
		path = path[:maxMissingPath] + "…"
	}
	if len(in.Missing) >= maxMissing || slices.Contains(in.Missing, path) {
		return
	}
	in.Missing = append(in.Missing, path)
}

// Err is a *LimitError once rendering ran past the budget, else nil. What
// was rendered by then is cut short and must not be used.
func (in *Interpolation) Err() error { return in.err }

// spend takes n bytes from the budget and reports whether they fit.
func (in *Interpolation) spend(n int) bool {
	if in.err != nil {
		return false
	}
	if n > in.budget {
		in.budget = 0
		in.err = &LimitError{Field: "rendered template", Limit: "limits.renderBytes", Max: int64(in.limit), Got: -1}
		return false
	}
	in.budget -= n
	return true
}

// Value interpolates every string inside v. A string that is exactly one
// placeholder keeps the JSON type of the variable it names.
func (in *Interpolation) Value(v any) any {
	switch t := v.(type) {
	case string:
		return in.str(t)
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			if !in.spend(len(k)) {
				return out
			}
			out[k] = in.Value(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = in.Value(x)
		}
		return out
	default:
		in.spend(8)
		return v
	}
}

func (in *Interpolation) str(s string) any {
	if m := placeholder.FindStringSubmatchIndex(s); m != nil && m[0] == 0 && m[1] == len(s) {
		path := submatch(s, m)
		val, ok := in.vars.Lookup(path)
		if !ok {
			in.missing(path)
			return ""
		}
		if !in.spend(jsonSize(val, in.budget+1)) {
			return nil
		}
		return val
	}
	return in.Text(s)
}

// Text interpolates s as text: lists of scalars join with ", ", objects
// render as JSON, a missing variable renders empty.
func (in *Interpolation) Text(s string) string {
	var b strings.Builder
	last := 0
	for _, m := range placeholder.FindAllStringSubmatchIndex(s, -1) {
		if !in.spend(m[0] - last) {
			return b.String()
		}
		b.WriteString(s[last:m[0]])
		last = m[1]
		path := submatch(s, m)
		val, ok := in.vars.Lookup(path)
		if !ok {
			in.missing(path)
			continue
		}
		text := RenderText(val)
		if !in.spend(len(text)) {
			return b.String()
		}
		b.WriteString(text)
	}
	if !in.spend(len(s) - last) {
		return b.String()
	}
	b.WriteString(s[last:])
	return b.String()
}

// jsonSize is about the size of v as JSON, counted no further than stop.
func jsonSize(v any, stop int) int {
	size := 0
	var walk func(any)
	walk = func(v any) {
		if size > stop {
			return
		}
		switch t := v.(type) {
		case string:
			size += len(t) + 2
		case map[string]any:
			size += 2
			for k, x := range t {
				size += len(k) + 4
				walk(x)
				if size > stop {
					return
				}
			}
		case []any:
			size += 2
			for _, x := range t {
				size++
				walk(x)
				if size > stop {
					return
				}
			}
		default:
			size += 8
		}
	}
	walk(v)
	return size
}

func submatch(s string, m []int) string {
	if m[2] >= 0 {
		return s[m[2]:m[3]]
	}
	return s[m[4]:m[5]]
}

// RenderText renders a variable as text: lists of scalars join with ", ",
// objects render as JSON, nil renders empty.
func RenderText(v any) string {
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
			parts = append(parts, RenderText(x))
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
