package console

import (
	"fmt"
	"html/template"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/batonrun/baton/engine/workflow"
)

// GraphMarks says what a drawn workflow graph highlights.
type GraphMarks struct {
	// Visited holds the ids of the nodes an execution has been through;
	// nil marks none.
	Visited map[string]bool
	// Current is the id of the node an execution is at; empty marks none.
	Current string
	// Problems maps a node id to what is wrong with that node (see
	// GraphProblems). The "" key is the definition itself: it is not drawn
	// on any node. Nil marks none.
	Problems map[string][]string
}

// GraphProblems groups a validation error's problems by node id, each
// message prefixed with its field, as GraphMarks.Problems takes them.
func GraphProblems(problems []workflow.Problem) map[string][]string {
	out := make(map[string][]string)
	for _, p := range problems {
		msg := p.Message
		if p.Field != "" {
			msg = p.Field + ": " + msg
		}
		out[p.NodeID] = append(out[p.NodeID], msg)
	}
	return out
}

// Sizes of the drawing, in SVG user units (CSS pixels when not scaled).
const (
	graphBoxW  = 176 // a node's box
	graphBoxH  = 44
	graphHGap  = 24 // between boxes of a layer
	graphVGap  = 60 // between layers, where edges and their labels run
	graphSide  = 16 // left and right margin
	graphPadY  = 16 // top and bottom margin without back edges
	graphLoopY = 56 // top and bottom margin with back edges, which run there
	graphLane  = 12 // between the vertical runs of back edges
	// Back edges run across a gap at one of graphSlots heights, graphSlot
	// apart, by lane: room for a label under each.
	graphSlot  = 12
	graphSlots = 4
	// A missing target's box is smaller than a node's, inset in its slot.
	graphMissingX = 16
	graphMissingY = 8
)

// Text budgets, in half units of a lowercase letter's width (see fitText).
const (
	graphIDUnits    = 44
	graphKindUnits  = 52
	graphLabelUnits = 28
)

// RenderGraph draws a workflow definition's nodes as one <svg> element, top
// to bottom: each node's layer is its shortest distance from the start node
// (the first node when none is of type start), following next and then the
// branches in key order; nodes the start does not reach come in a last
// layer. A definition that failed validation is drawn too: an edge to an id
// no node has ends at a dashed "missing" box, and a duplicate id's later
// nodes are drawn among the unreached ones. Every id, name and message is
// escaped, so the result is safe to embed in a page. It takes time about
// linear in the nodes and edges.
//
// A stylesheet may style the parts by class: the svg is "graph"; a node is
// a <g class="node"> with data-node set to its id, "visited", "current" and
// "problem" added as marked, holding a <title>, a <rect> and two <text>
// lines; a missing target is a <g class="missing">; an edge is a
// <g class="edge">, with "back" when it loops back and "missing" when it
// leads to a missing target, holding a <path> and, for branches, a <text
// class="edge-label">. Presentation attributes give a plain look that any
// CSS rule overrides.
func RenderGraph(nodes []*workflow.Node, marks GraphMarks) template.HTML {
	g := layoutGraph(nodes)
	w := &svgWriter{}
	w.b.Grow(g.sizeHint())
	w.open(g.width, g.height)
	if len(g.boxes) == 0 {
		w.raw(`<text x="16" y="24" fill="#555">no nodes</text>`)
	}
	// What edges and boxes share is said once, on a group around them.
	w.raw(`<g fill="none" stroke="#666" stroke-width="1.5" text-anchor="middle">`)
	for i := range g.edges {
		w.edge(g, &g.edges[i])
	}
	w.raw(`</g><g text-anchor="middle">`)
	for i := range g.boxes {
		if b := &g.boxes[i]; b.node == nil {
			w.missingBox(b)
		} else {
			w.nodeBox(b, marks)
		}
	}
	w.raw(`</g></svg>`)
	// Safe: every string in it went through svgWriter.text.
	return template.HTML(w.b.String())
}

const (
	graphArrowID = "baton-graph-arrow"
	graphClipID  = "baton-graph-clip"
)

// The markup every drawing repeats, made once from the sizes.
var (
	graphDefs = `<defs><marker id="` + graphArrowID + `" viewBox="0 0 10 10" refX="10" refY="5" markerUnits="userSpaceOnUse" markerWidth="9" markerHeight="9" orient="auto"><path d="M0 0L10 5L0 10z" fill="#666"/></marker>` +
		fmt.Sprintf(`<clipPath id="%s"><rect x="4" y="0" width="%d" height="%d"/></clipPath></defs>`, graphClipID, graphBoxW-8, graphBoxH)
	graphRect     = fmt.Sprintf(`<rect width="%d" height="%d" rx="6"`, graphBoxW, graphBoxH)
	graphPillRect = fmt.Sprintf(`<rect width="%d" height="%d" rx="%d"`, graphBoxW, graphBoxH, graphBoxH/2)
	graphIDText   = fmt.Sprintf(`<text x="%d" y="18" font-weight="bold" fill="#111" clip-path="url(#%s)">`, graphBoxW/2, graphClipID)
	graphKindText = fmt.Sprintf(`<text x="%d" y="34" font-size="11" fill="#555" clip-path="url(#%s)">`, graphBoxW/2, graphClipID)
	graphMissing  = fmt.Sprintf(`<rect x="%d" y="%d" width="%d" height="%d" rx="4" fill="#fff5f5" stroke="#c62828" stroke-dasharray="4 3"/>`+
		`<text x="%d" y="%d" font-size="11" fill="#c62828" clip-path="url(#%s)">missing: `,
		graphMissingX, graphMissingY, graphBoxW-2*graphMissingX, graphBoxH-2*graphMissingY, graphBoxW/2, graphBoxH/2+4, graphClipID)
)

// svgWriter writes SVG markup. Numbers are written as they are; every
// string goes through text, which escapes it.
type svgWriter struct {
	b       strings.Builder
	scratch [20]byte
}

func (w *svgWriter) raw(s string) { w.b.WriteString(s) }
func (w *svgWriter) num(n int)    { w.b.Write(strconv.AppendInt(w.scratch[:0], int64(n), 10)) }

// text writes s escaped, with what is not valid UTF-8 or a control
// character replaced by U+FFFD so the markup stays well-formed XML too.
func (w *svgWriter) text(s string) {
	if isPlainText(s) {
		w.raw(s)
		return
	}
	w.raw(template.HTMLEscapeString(cleanText(s)))
}

func (w *svgWriter) point(p graphPoint) {
	w.num(p.x)
	w.raw(" ")
	w.num(p.y)
}

func (w *svgWriter) open(width, height int) {
	w.raw(`<svg xmlns="http://www.w3.org/2000/svg" class="graph" aria-label="workflow graph" viewBox="0 0 `)
	w.point(graphPoint{width, height})
	w.raw(`" width="`)
	w.num(width)
	w.raw(`" height="`)
	w.num(height)
	w.raw(`" font-family="sans-serif" font-size="12">`)
	w.raw(graphDefs)
}

func (w *svgWriter) edge(g *graphLayout, e *graphEdge) {
	missing := g.boxes[e.to].node == nil
	w.raw(`<g class="edge`)
	if e.back {
		w.raw(" back")
	}
	if missing {
		w.raw(" missing")
	}
	w.raw(`"><path d="M`)
	p := e.points
	w.point(p[0])
	if e.back {
		for _, q := range p[1:] {
			w.raw("L")
			w.point(q)
		}
	} else {
		midY := (p[0].y + p[1].y) / 2
		w.raw("C")
		w.point(graphPoint{p[0].x, midY})
		w.raw(" ")
		w.point(graphPoint{p[1].x, midY})
		w.raw(" ")
		w.point(p[1])
	}
	w.raw(`"`)
	if missing {
		w.raw(` stroke-dasharray="5 4"`)
	}
	w.raw(` marker-end="url(#` + graphArrowID + `)"/>`)
	if len(e.keys) > 0 {
		w.edgeLabel(e)
	}
	w.raw(`</g>`)
}

// edgeLabel writes the branch keys of an edge. A forward edge's label
// sits on its curve two thirds of the way down, near the node it leads
// to, so the labels of a decision's branches stand apart; a back edge's
// under its run out of the source, in its slot.
func (w *svgWriter) edgeLabel(e *graphEdge) {
	p := e.points
	end := p[len(p)-1]
	at := graphPoint{p[0].x + (end.x-p[0].x)*784/1000, p[0].y + (end.y-p[0].y)*658/1000 + 4}
	if e.back {
		at = graphPoint{p[1].x + 4, p[1].y + 10}
	}
	w.raw(`<text class="edge-label" x="`)
	w.num(at.x)
	w.raw(`" y="`)
	w.num(at.y)
	if e.back {
		w.raw(`" text-anchor="start`)
	}
	w.raw(`" font-size="11" fill="#333" stroke="#fff" stroke-width="3" paint-order="stroke">`)
	label := e.keys[0]
	if len(e.keys) > 1 {
		label = strings.Join(e.keys, ", ")
	}
	label = cleanText(label)
	short, cut := fitText(label, graphLabelUnits)
	if cut {
		w.raw(`<title>`)
		w.text(label)
		w.raw(`</title>`)
	}
	w.shortened(short, cut)
	w.raw(`</text>`)
}

// shortened writes the start of a text fitText kept, and an ellipsis when
// it cut the rest.
func (w *svgWriter) shortened(short string, cut bool) {
	w.text(short)
	if cut {
		w.raw("…")
	}
}

func (w *svgWriter) nodeBox(b *graphBox, marks GraphMarks) {
	n := b.node
	problems := marks.Problems[b.id]
	if b.id == "" {
		problems = nil // the definition's own, not this node's
	}
	w.raw(`<g class="node`)
	fill, stroke, width := ` fill="#fff"`, ` stroke="#888"`, ` stroke-width="1"/>`
	if marks.Visited[b.id] {
		w.raw(" visited")
		fill = ` fill="#e6f4ea"`
	}
	current := b.id != "" && b.id == marks.Current
	if current {
		w.raw(" current")
		stroke, width = ` stroke="#1a66c2"`, ` stroke-width="3"/>`
	}
	if len(problems) > 0 {
		w.raw(" problem")
		stroke = ` stroke="#c62828"`
		if !current {
			width = ` stroke-width="2"/>`
		}
	}
	w.raw(`" data-node="`)
	w.text(b.id)
	w.raw(`" transform="translate(`)
	w.point(graphPoint{b.x, b.y})
	w.raw(`)">`)
	w.nodeTitle(b, problems)
	if n.Type == workflow.NodeStart || n.Type == workflow.NodeEnd {
		w.raw(graphPillRect)
	} else {
		w.raw(graphRect)
	}
	w.raw(fill)
	w.raw(stroke)
	w.raw(width)
	w.raw(graphIDText)
	w.shortened(fitText(cleanText(b.label()), graphIDUnits))
	w.raw(`</text>`)
	w.raw(graphKindText)
	prefix, kind := nodeKind(n)
	w.raw(prefix)
	w.shortened(fitText(cleanText(kind), graphKindUnits-2*len(prefix)))
	w.raw(`</text></g>`)
}

func (w *svgWriter) missingBox(b *graphBox) {
	w.raw(`<g class="missing" transform="translate(`)
	w.point(graphPoint{b.x, b.y})
	w.raw(`)"><title>missing: `)
	w.text(b.id)
	w.raw("\nno node has this id</title>")
	w.raw(graphMissing)
	w.shortened(fitText(cleanText(b.id), graphKindUnits-8-2*len("missing: ")))
	w.raw(`</text></g>`)
}

// nodeKind is the second line of a node's box, a fixed prefix and a
// tenant's text: its action, its task's tool, or its type.
func nodeKind(n *workflow.Node) (prefix, kind string) {
	switch {
	case n.Type == workflow.NodeAction && n.ActionType != "":
		return "", n.ActionType
	case n.Type == workflow.NodeTask && n.Task != "":
		return "task: ", n.Task
	case n.Type == "":
		return "(no type)", ""
	}
	return "", n.Type
}

// nodeTitle writes a node's tooltip: its id, name and kind in full, then
// its problems.
func (w *svgWriter) nodeTitle(b *graphBox, problems []string) {
	w.raw(`<title>`)
	w.text(b.label())
	if b.node.Name != "" {
		w.raw("\n")
		w.text(b.node.Name)
	}
	prefix, kind := nodeKind(b.node)
	w.raw("\n")
	w.raw(prefix)
	w.text(kind)
	for _, p := range problems {
		w.raw("\n• ")
		w.text(p)
	}
	w.raw(`</title>`)
}

// isPlainText reports whether s is printable ASCII with nothing to escape.
func isPlainText(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20, c >= 0x7f, c == '<', c == '>', c == '&', c == '"', c == '\'':
			return false
		}
	}
	return true
}

// cleanText replaces what is not valid UTF-8, the control characters but
// tab and newline, and the non-characters XML refuses, with U+FFFD.
func cleanText(s string) string {
	if isCleanText(s) {
		return s
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t', r == '\n':
			return r
		case r < 0x20, r == 0xFFFE, r == 0xFFFF:
			return utf8.RuneError
		}
		return r
	}, strings.ToValidUTF8(s, string(utf8.RuneError)))
}

// isCleanText reports whether cleanText would leave s as it is.
func isCleanText(s string) bool {
	ascii := true
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= utf8.RuneSelf:
			ascii = false
		case c < 0x20 && c != '\t' && c != '\n':
			return false
		}
	}
	return ascii || utf8.ValidString(s) && !strings.ContainsRune(s, 0xFFFE) && !strings.ContainsRune(s, 0xFFFF)
}

// fitText returns what of s fits a width of units, leaving room for an
// ellipsis when it cuts s short, and whether it did. Width is counted in
// half the width of a lowercase letter: 2 for most characters, 3 for a
// capital, 4 for the wide ones of East Asian scripts and emoji.
func fitText(s string, units int) (string, bool) {
	used, cut := 0, -1
	for i, r := range s {
		w := 2
		switch {
		case r >= 'A' && r <= 'Z', r == 'm', r == 'w', r == '@':
			w = 3
		case r >= 0x2E80:
			w = 4
		}
		if used+w > units-2 && cut < 0 {
			cut = i // where the ellipsis goes, if s goes on past units
		}
		used += w
		if used > units {
			return s[:cut], true
		}
	}
	return s, false
}
