package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/batonrun/baton/engine/workflow"
)

// Budgets of one JSON value a page shows (variables, a result, a wait's
// data, a definition's source). The value is indented while it is read,
// so a page never holds more of it than these allow, however large or
// deep the value is; docs/console.md lists them.
const (
	// maxJSONShown bounds the indented text of one value, in bytes; what
	// follows is cut.
	maxJSONShown = 64 << 10
	// maxJSONDepth bounds the levels of one value shown: an object or
	// array nested deeper is shown collapsed, as {…} or […].
	maxJSONDepth = 32
)

// jsonBudget bounds what jsonText shows of a value.
type jsonBudget struct {
	// Bytes bounds the indented text, in bytes.
	Bytes int
	// Depth is the deepest level shown; deeper containers collapse.
	Depth int
}

// pageJSON is the budget of the console's pages.
var pageJSON = jsonBudget{Bytes: maxJSONShown, Depth: maxJSONDepth}

// shownJSON is one JSON value as a page shows it, and what the page left
// out.
type shownJSON struct {
	// Name names the value on its page; the cut note's id is
	// "<Name>-cut".
	Name string
	// Text is the value indented by two spaces, within the budget.
	Text string
	// Bytes is the size of the value's JSON.
	Bytes int
	// Truncated reports that the text stops before the value's end: the
	// byte budget was reached.
	Truncated bool
	// Collapsed counts the containers shown as {…} or […] because they
	// nest deeper than the depth budget.
	Collapsed int
	// Whole is the API URL that answers the value whole; empty when there
	// is none to offer.
	Whole string
	// Budget is the budget the text was held to.
	Budget jsonBudget
}

// Cut reports that the page does not show the whole value.
func (s shownJSON) Cut() bool { return s.Truncated || s.Collapsed > 0 }

// showJSON renders a value for a page (the templates' json function):
// name names it, v is raw JSON ([]byte, json.RawMessage), a decoded JSON
// value (workflow.Variables, map[string]any, []any, scalars) or any value
// that marshals, and whole is the API URL that answers it whole.
func showJSON(name string, v any, whole string) shownJSON {
	var s shownJSON
	switch x := v.(type) {
	case json.RawMessage:
		s = jsonText(x, pageJSON)
	case []byte:
		s = jsonText(x, pageJSON)
	default:
		s = valueText(x, pageJSON)
	}
	s.Name, s.Whole = name, whole
	return s
}

// jsonText indents raw JSON within a budget, in one pass over raw that
// stops once the text is full: its cost is linear in the part of raw it
// reads and its output at most b.Bytes, whatever raw's depth (indenting
// the whole value first would cost its depth squared). Input that is not
// valid JSON is shown as it comes, held to the same budget.
func jsonText(raw []byte, b jsonBudget) shownJSON {
	in := newIndenter(b, len(raw))
	in.scan(raw)
	text := string(in.out)
	if len(bytes.TrimSpace(raw)) == 0 {
		text = "null"
	}
	return shownJSON{Text: text, Bytes: len(raw), Truncated: in.full, Collapsed: in.collapsed, Budget: b}
}

// valueText indents a decoded JSON value within a budget, as jsonText
// does raw JSON: it walks the value no deeper than b.Depth and stops once
// the text is full, so it never marshals the whole value. Bytes is the
// size of the value's compact JSON when the walk read all of it, else 0
// (unknown).
func valueText(v any, b jsonBudget) shownJSON {
	in := newIndenter(b, 4<<10)
	in.value(v)
	s := shownJSON{Text: string(in.out), Truncated: in.full, Collapsed: in.collapsed, Budget: b}
	if !s.Cut() {
		s.Bytes = in.compact
	}
	return s
}

// indenter writes a JSON value indented, token by token, into out, read
// from raw JSON (scan) or from a decoded value (value).
type indenter struct {
	src    []byte
	pos    int
	budget jsonBudget
	out    []byte
	depth  int
	// full is set once a token did not fit: the text is cut.
	full      bool
	collapsed int
	// compact counts the bytes of the value's compact JSON written (the
	// indentation aside).
	compact int
}

// newIndenter is an indenter for a budget, its output sized for a value
// of about size bytes.
func newIndenter(b jsonBudget, size int) *indenter {
	return &indenter{budget: b, out: make([]byte, 0, min(b.Bytes, 2*size+16))}
}

// spaces are written by newline, a chunk at a time.
var spaces = bytes.Repeat([]byte{' '}, 64)

// scan writes the raw JSON src.
func (in *indenter) scan(src []byte) {
	in.src, in.pos = src, 0
	for in.pos < len(in.src) && !in.full {
		switch c := in.src[in.pos]; c {
		case ' ', '\t', '\n', '\r':
			in.pos++
		case '{', '[':
			in.open(c)
		case '}', ']':
			in.pos++
			in.depth = max(in.depth-1, 0)
			in.newline()
			in.write([]byte{c})
		case ',':
			in.pos++
			in.write([]byte{','})
			in.newline()
		case ':':
			in.pos++
			in.write([]byte(": "))
		case '"':
			end := stringEnd(in.src, in.pos)
			in.write(in.src[in.pos:end])
			in.pos = end
		default: // a number, true, false, null, or what is not JSON
			end := literalEnd(in.src, in.pos)
			in.write(in.src[in.pos:end])
			in.pos = end
		}
	}
}

// open writes an object or array that starts at pos: {} or [] when it is
// empty, collapsed when it nests deeper than the budget, else its opening
// and the first line of its contents.
func (in *indenter) open(c byte) {
	closing := byte('}')
	if c == '[' {
		closing = ']'
	}
	if in.depth >= in.budget.Depth {
		in.pos = containerEnd(in.src, in.pos)
		in.collapsed++
		in.write([]byte{c, 0xe2, 0x80, 0xa6, closing}) // {…} or […]
		return
	}
	in.pos++
	next := skipSpace(in.src, in.pos)
	if next < len(in.src) && in.src[next] == closing {
		in.pos = next + 1
		in.write([]byte{c, closing})
		return
	}
	in.depth++
	in.write([]byte{c})
	in.newline()
}

// newline starts a line at the current depth.
func (in *indenter) newline() {
	in.write([]byte{'\n'})
	for n := 2 * in.depth; n > 0 && !in.full; n -= len(spaces) {
		in.write(spaces[:min(n, len(spaces))])
	}
}

// write appends p, or as much of it as the budget allows, cut at a rune
// boundary; a cut marks the text full.
func (in *indenter) write(p []byte) {
	if in.full {
		return
	}
	room := in.budget.Bytes - len(in.out)
	if len(p) <= room {
		in.out = append(in.out, p...)
		return
	}
	cut := max(room, 0)
	for cut > 0 && !utf8.RuneStart(p[cut]) {
		cut--
	}
	in.out = append(in.out, p[:cut]...)
	in.full = true
}

// stringEnd is the index after the string that starts at i (a quote), or
// len(src) when it does not end.
func stringEnd(src []byte, i int) int {
	for j := i + 1; j < len(src); j++ {
		switch src[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(src)
}

// literalEnd is the index after the literal that starts at i: up to the
// next space, delimiter or quote (at least one byte, so that any input
// moves on).
func literalEnd(src []byte, i int) int {
	j := i + 1
	for j < len(src) {
		switch src[j] {
		case ' ', '\t', '\n', '\r', ',', ':', '{', '}', '[', ']', '"':
			return j
		}
		j++
	}
	return j
}

// containerEnd is the index after the object or array that starts at i,
// skipping the strings inside it, or len(src) when it does not end.
func containerEnd(src []byte, i int) int {
	depth := 0
	for j := i; j < len(src); j++ {
		switch src[j] {
		case '"':
			j = stringEnd(src, j) - 1
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return j + 1
			}
		}
	}
	return len(src)
}

// skipSpace is the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(src []byte, i int) int {
	for i < len(src) {
		switch src[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// value writes a decoded JSON value: objects with their keys sorted (as
// encoding/json writes them), no deeper than the budget, until the text
// is full. Values of other types are marshalled, one at a time.
func (in *indenter) value(v any) {
	if in.full {
		return
	}
	switch x := v.(type) {
	case workflow.Variables:
		in.object(x)
	case map[string]any:
		in.object(x)
	case []any:
		in.array(x)
	case string:
		in.quoted(x)
	case nil:
		in.token([]byte("null"))
	default:
		b, err := json.Marshal(x)
		if err != nil {
			b = []byte(strconv.Quote(fmt.Sprintf("(cannot show: %v)", err)))
		}
		in.token(b)
	}
}

// object writes a decoded object, collapsed when it nests deeper than the
// budget.
func (in *indenter) object(m map[string]any) {
	if len(m) == 0 {
		in.token([]byte("{}"))
		return
	}
	if in.depth >= in.budget.Depth {
		in.collapse("{…}")
		return
	}
	in.depth++
	in.token([]byte{'{'})
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if in.full {
			return
		}
		if i > 0 {
			in.token([]byte{','})
		}
		in.newline()
		in.quoted(k)
		in.token([]byte{':'})
		in.write([]byte{' '})
		in.value(m[k])
	}
	in.depth--
	in.newline()
	in.token([]byte{'}'})
}

// array writes a decoded array, collapsed when it nests deeper than the
// budget.
func (in *indenter) array(a []any) {
	if len(a) == 0 {
		in.token([]byte("[]"))
		return
	}
	if in.depth >= in.budget.Depth {
		in.collapse("[…]")
		return
	}
	in.depth++
	in.token([]byte{'['})
	for i, v := range a {
		if in.full {
			return
		}
		if i > 0 {
			in.token([]byte{','})
		}
		in.newline()
		in.value(v)
	}
	in.depth--
	in.newline()
	in.token([]byte{']'})
}

// collapse writes a container nested too deep as mark.
func (in *indenter) collapse(mark string) {
	in.collapsed++
	in.write([]byte(mark))
}

// quoted writes s as a JSON string, not escaped for HTML (the template
// escapes what it shows, and "<" reads better than "\u003c"). Only as
// much of s as can fit is encoded.
func (in *indenter) quoted(s string) {
	if n := in.budget.Bytes - len(in.out); len(s) > n {
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:max(n, 0)]
		// Escaping only lengthens s, so the quoted prefix overflows the
		// budget and the text is cut inside it.
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	in.token(bytes.TrimSuffix(b.Bytes(), []byte{'\n'}))
}

// token writes a token of the value, counting it in compact.
func (in *indenter) token(p []byte) {
	in.compact += len(p)
	in.write(p)
}
