package console

import (
	"encoding/xml"
	"errors"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine/workflow"
)

// svgElement is one element of a rendered graph, parsed back.
type svgElement struct {
	name     string
	attrs    map[string]string
	children []*svgElement
	text     string // the character data directly inside
}

// parseSVG parses a rendered graph as strict XML: one svg element in the
// SVG namespace, with no comments, directives or processing instructions.
func parseSVG(t *testing.T, out template.HTML) *svgElement {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(string(out)))
	var root *svgElement
	var stack []*svgElement
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "the graph is well-formed XML")
		switch tok := tok.(type) {
		case xml.StartElement:
			require.Equal(t, "http://www.w3.org/2000/svg", tok.Name.Space)
			e := &svgElement{name: tok.Name.Local, attrs: map[string]string{}}
			for _, a := range tok.Attr {
				e.attrs[a.Name.Local] = a.Value
			}
			if len(stack) == 0 {
				require.Nil(t, root, "one root element")
				root = e
			} else {
				parent := stack[len(stack)-1]
				parent.children = append(parent.children, e)
			}
			stack = append(stack, e)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			require.NotEmpty(t, stack, "no text outside the svg element")
			stack[len(stack)-1].text += string(tok)
		default:
			t.Fatalf("unexpected %T in the graph: %v", tok, tok)
		}
	}
	require.NotNil(t, root)
	require.Equal(t, "svg", root.name)
	return root
}

// all returns e and every element inside it for which keep is true, in
// document order.
func (e *svgElement) all(keep func(*svgElement) bool) []*svgElement {
	var out []*svgElement
	if keep(e) {
		out = append(out, e)
	}
	for _, c := range e.children {
		out = append(out, c.all(keep)...)
	}
	return out
}

func (e *svgElement) hasClass(c string) bool {
	for _, have := range strings.Fields(e.attrs["class"]) {
		if have == c {
			return true
		}
	}
	return false
}

func (e *svgElement) child(name string) *svgElement {
	for _, c := range e.children {
		if c.name == name {
			return c
		}
	}
	return nil
}

// texts returns the text of e's <text> children, in order.
func (e *svgElement) texts() []string {
	var out []string
	for _, c := range e.children {
		if c.name == "text" {
			out = append(out, c.text)
		}
	}
	return out
}

// missingBox is true for the box of a missing target.
func missingBox(e *svgElement) bool { return e.hasClass("missing") && !e.hasClass("edge") }

func withClass(c string) func(*svgElement) bool {
	return func(e *svgElement) bool { return e.hasClass(c) }
}

// nodeGroups returns the node groups of a graph by their data-node.
func nodeGroups(root *svgElement) map[string][]*svgElement {
	out := map[string][]*svgElement{}
	for _, g := range root.all(withClass("node")) {
		out[g.attrs["data-node"]] = append(out[g.attrs["data-node"]], g)
	}
	return out
}

// corner returns where a group was translated to.
func corner(t *testing.T, g *svgElement) graphPoint {
	t.Helper()
	var p graphPoint
	_, err := fmt.Sscanf(g.attrs["transform"], "translate(%d %d)", &p.x, &p.y)
	require.NoError(t, err, g.attrs["transform"])
	return p
}

// nodesOf parses a definition's nodes, given as a JSON array.
func nodesOf(t *testing.T, nodes string) []*workflow.Node {
	t.Helper()
	def, err := workflow.ParseDefinition([]byte(`{"workflow_id": "w", "version": "1", "nodes": ` + nodes + `}`))
	require.NoError(t, err)
	return def.Nodes
}

func nodesFromFile(t *testing.T, path string) []*workflow.Node {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", path))
	require.NoError(t, err)
	def, err := workflow.ParseDefinition(raw)
	require.NoError(t, err)
	return def.Nodes
}

func TestGraphChain(t *testing.T) {
	t.Parallel()
	nodes := nodesFromFile(t, "cmd/baton/demo/document-collector.json")
	g := layoutGraph(nodes)
	require.Equal(t, [][]string{{"start"}, {"ask"}, {"wait"}, {"thanks"}, {"end"}}, layerIDs(g))
	require.Equal(t, []string{"start->ask", "ask->wait", "wait->thanks", "thanks->end"}, edgeNames(g))
	requireApart(t, g)

	root := parseSVG(t, RenderGraph(nodes, GraphMarks{}))
	require.Equal(t, "graph", root.attrs["class"])
	require.Equal(t, fmt.Sprintf("0 0 %s %s", root.attrs["width"], root.attrs["height"]), root.attrs["viewBox"])
	groups := nodeGroups(root)
	lastY := -1
	for _, id := range []string{"start", "ask", "wait", "thanks", "end"} {
		require.Len(t, groups[id], 1, id)
		y := corner(t, groups[id][0]).y
		require.Greater(t, y, lastY, "%s is below the node before it", id)
		lastY = y
	}
	require.Equal(t, []string{"wait", "request_document"}, groups["wait"][0].texts())
	require.Equal(t, []string{"start", "start"}, groups["start"][0].texts())
	require.Len(t, root.all(withClass("edge")), 4)
	require.Empty(t, root.all(withClass("back")))
	require.Empty(t, root.all(withClass("edge-label")), "a chain has no branches to label")
	for _, m := range root.all(func(e *svgElement) bool { return e.name == "path" && e.attrs["marker-end"] != "" }) {
		require.Equal(t, "url(#"+graphArrowID+")", m.attrs["marker-end"])
	}
	require.Len(t, root.all(func(e *svgElement) bool { return e.name == "marker" && e.attrs["id"] == graphArrowID }), 1)
}

func TestGraphDecision(t *testing.T) {
	t.Parallel()
	nodes := nodesOf(t, `[
		{"id": "start", "type": "start", "next": "check"},
		{"id": "check", "type": "decision", "condition": "x", "branches": {"true": "yes", "false": "no"}},
		{"id": "yes", "type": "task", "task": "fetch", "next": "end"},
		{"id": "no", "type": "action", "actionType": "send_message", "next": "end"},
		{"id": "end", "type": "end"}]`)
	g := layoutGraph(nodes)
	require.Equal(t, [][]string{{"start"}, {"check"}, {"no", "yes"}, {"end"}}, layerIDs(g), "branches in key order")
	require.Equal(t, []string{"start->check", "check->no [false]", "check->yes [true]", "no->end", "yes->end"}, edgeNames(g))
	requireApart(t, g)

	root := parseSVG(t, RenderGraph(nodes, GraphMarks{}))
	var labels []string
	for _, l := range root.all(withClass("edge-label")) {
		labels = append(labels, l.text)
	}
	require.Equal(t, []string{"false", "true"}, labels)
	groups := nodeGroups(root)
	require.Equal(t, []string{"yes", "task: fetch"}, groups["yes"][0].texts())
	require.Equal(t, []string{"no", "send_message"}, groups["no"][0].texts())
	require.Equal(t, corner(t, groups["no"][0]).y, corner(t, groups["yes"][0]).y, "one layer")
	require.Less(t, corner(t, groups["no"][0]).x, corner(t, groups["yes"][0]).x, "discovery order")

	// Two branches to one node share one arrow with both keys.
	same := nodesOf(t, `[
		{"id": "start", "type": "start", "next": "check"},
		{"id": "check", "type": "decision", "condition": "x", "branches": {"b": "end", "a": "end"}},
		{"id": "end", "type": "end"}]`)
	require.Equal(t, []string{"start->check", "check->end [a, b]"}, edgeNames(layoutGraph(same)))

	// So do many, past the point where they are looked up in a map; the
	// label is shortened, the title has every key.
	many := map[string]string{"zz": "start"}
	var keys []string
	for i := range 12 {
		keys = append(keys, fmt.Sprintf("k%02d", i))
		many[keys[i]] = "end"
	}
	nodes = []*workflow.Node{
		{ID: "start", Type: workflow.NodeStart, Next: "check"},
		{ID: "check", Type: workflow.NodeDecision, Branches: many},
		{ID: "end", Type: workflow.NodeEnd},
	}
	g = layoutGraph(nodes)
	require.Equal(t, []string{"start->check", "check->end [" + strings.Join(keys, ", ") + "]", "check->start [zz] back"}, edgeNames(g))
	label := parseSVG(t, RenderGraph(nodes, GraphMarks{})).all(withClass("edge-label"))[0]
	require.Equal(t, strings.Join(keys, ", "), label.child("title").text)
	require.True(t, strings.HasPrefix(label.text, "k00, k01"), label.text)
	require.True(t, strings.HasSuffix(label.text, "…"), label.text)
}

func TestGraphLoop(t *testing.T) {
	t.Parallel()
	nodes := nodesOf(t, `[
		{"id": "start", "type": "start", "next": "ask"},
		{"id": "ask", "type": "action", "actionType": "request_input", "next": "side"},
		{"id": "side", "type": "action", "actionType": "send_message", "next": "check"},
		{"id": "check", "type": "decision", "condition": "x",
		 "branches": {"again": "ask", "self": "check", "done": "end", "other": "wide"}},
		{"id": "wide", "type": "action", "actionType": "send_message", "next": "side"},
		{"id": "end", "type": "end"}]`)
	g := layoutGraph(nodes)
	require.Equal(t, [][]string{{"start"}, {"ask"}, {"side"}, {"check"}, {"end", "wide"}}, layerIDs(g))
	require.Equal(t, []string{
		"start->ask", "ask->side", "side->check",
		"check->ask [again] back", "check->end [done]", "check->wide [other]", "check->check [self] back",
		"wide->side back",
	}, edgeNames(g))
	requireApart(t, g)
	// The three back edges overlap in height: each takes its own lane.
	require.Equal(t, 3, g.lanes)

	root := parseSVG(t, RenderGraph(nodes, GraphMarks{}))
	back := root.all(withClass("back"))
	require.Len(t, back, 3)
	for _, e := range back {
		require.True(t, e.hasClass("edge"))
	}
	require.Equal(t, "again", back[0].child("text").text)
	require.Equal(t, "url(#"+graphArrowID+")", back[0].child("path").attrs["marker-end"])

	// Back edges whose heights do not overlap share a lane.
	two := nodesOf(t, `[
		{"id": "start", "type": "start", "next": "a"},
		{"id": "a", "type": "action", "actionType": "send_message", "next": "b"},
		{"id": "b", "type": "decision", "condition": "x", "branches": {"again": "a", "on": "c"}},
		{"id": "c", "type": "action", "actionType": "send_message", "next": "d"},
		{"id": "d", "type": "action", "actionType": "send_message", "next": "e"},
		{"id": "e", "type": "decision", "condition": "x", "branches": {"again": "d", "on": "end"}},
		{"id": "end", "type": "end"}]`)
	g = layoutGraph(two)
	require.Equal(t, 1, g.lanes)
	requireApart(t, g)
}

func TestGraphMissingTarget(t *testing.T) {
	t.Parallel()
	nodes := []*workflow.Node{
		{ID: "start", Type: workflow.NodeStart, Next: "check"},
		{ID: "check", Type: workflow.NodeDecision, Branches: map[string]string{"true": "ghost", "false": "end", "empty": ""}},
		{ID: "end", Type: workflow.NodeEnd, Next: "ghost"},
	}
	g := layoutGraph(nodes)
	require.Equal(t, [][]string{{"start"}, {"check"}, {"end", "missing:ghost"}}, layerIDs(g))
	require.Equal(t, []string{"start->check", "check->end [false]", "check->ghost [true]", "end->ghost back"}, edgeNames(g))
	requireApart(t, g)

	root := parseSVG(t, RenderGraph(nodes, GraphMarks{}))
	missing := root.all(missingBox)
	require.Len(t, missing, 1, "one box per missing id")
	require.Equal(t, []string{"missing: ghost"}, missing[0].texts())
	require.Contains(t, missing[0].child("title").text, "missing: ghost")
	require.Empty(t, missing[0].attrs["data-node"], "a missing target is no node")
	require.Equal(t, "4 3", missing[0].child("rect").attrs["stroke-dasharray"])
	edges := root.all(func(e *svgElement) bool { return e.hasClass("edge") && e.hasClass("missing") })
	require.Len(t, edges, 2)
	for _, e := range edges {
		require.NotEmpty(t, e.child("path").attrs["stroke-dasharray"], "an edge to a missing node is dashed")
	}
	require.Len(t, nodeGroups(root), 3)
}

func TestGraphUnreachable(t *testing.T) {
	t.Parallel()
	nodes := []*workflow.Node{
		{ID: "orphan", Type: workflow.NodeAction, ActionType: "send_message", Next: "end"},
		{ID: "start", Type: workflow.NodeStart, Next: "end"},
		nil,
		{ID: "end", Type: workflow.NodeEnd},
		{ID: "lost", Type: workflow.NodeTask, Task: "fetch", Next: "nowhere"},
		{ID: "end", Type: workflow.NodeAction, ActionType: "delay", Next: "lost"},
		{Type: "mystery"},
	}
	g := layoutGraph(nodes)
	require.Equal(t, [][]string{{"start"}, {"end"}, {"orphan", "lost", "end", ""}, {"missing:nowhere"}}, layerIDs(g))
	require.Equal(t, []string{"start->end", "orphan->end back", "lost->nowhere", "end->lost back"}, edgeNames(g))
	requireApart(t, g)

	root := parseSVG(t, RenderGraph(nodes, GraphMarks{Problems: map[string][]string{
		"end": {"id: duplicate node id"}, "": {"nodes: missing a node of type start"},
	}}))
	groups := nodeGroups(root)
	require.Len(t, groups["end"], 2, "both nodes of a duplicate id are drawn")
	for _, g := range groups["end"] {
		require.True(t, g.hasClass("problem"))
	}
	require.Equal(t, []string{"(no id)", "mystery"}, groups[""][0].texts())
	require.False(t, groups[""][0].hasClass("problem"), "the definition's problems are on no node")
	require.Greater(t, corner(t, groups["orphan"][0]).y, corner(t, groups["end"][0]).y, "unreached nodes come last")

	// Without a start node, the first node leads.
	noStart := []*workflow.Node{
		{ID: "a", Type: workflow.NodeAction, Next: "b"},
		{ID: "b", Type: workflow.NodeEnd},
	}
	require.Equal(t, [][]string{{"a"}, {"b"}}, layerIDs(layoutGraph(noStart)))

	for _, empty := range [][]*workflow.Node{nil, {nil}} {
		root := parseSVG(t, RenderGraph(empty, GraphMarks{}))
		require.Empty(t, nodeGroups(root))
	}
}

func TestGraphMarks(t *testing.T) {
	t.Parallel()
	nodes := nodesFromFile(t, "examples/coordinator.json")
	root := parseSVG(t, RenderGraph(nodes, GraphMarks{
		Visited:  map[string]bool{"start": true, "greet": true, "collect": true, "check": true},
		Current:  "check",
		Problems: map[string][]string{"apologize": {"parameters.message: is required (a string)", "next: refers to unknown node"}},
	}))
	groups := nodeGroups(root)
	classes := map[string]string{}
	for id, g := range groups {
		require.Len(t, g, 1)
		classes[id] = g[0].attrs["class"]
	}
	require.Equal(t, map[string]string{
		"start": "node visited", "greet": "node visited", "collect": "node visited",
		"check": "node visited current", "apologize": "node problem",
		"next_step": "node", "end": "node",
	}, classes)
	title := groups["apologize"][0].child("title").text
	require.Contains(t, title, "parameters.message: is required (a string)")
	require.Contains(t, title, "next: refers to unknown node")
	require.NotContains(t, groups["next_step"][0].child("title").text, "•", "no problems, none listed")
	require.Equal(t, "#c62828", groups["apologize"][0].child("rect").attrs["stroke"])
	require.NotEqual(t, "#fff", groups["check"][0].child("rect").attrs["fill"], "visited nodes are filled")
	require.Equal(t, []string{"collect", "trigger_agent"}, groups["collect"][0].texts())

	problems := GraphProblems([]workflow.Problem{
		{Field: "workflow_id", Message: "is required"},
		{NodeID: "a", Field: "next", Message: "is required"},
		{NodeID: "a", Message: "bad"},
	})
	require.Equal(t, map[string][]string{"": {"workflow_id: is required"}, "a": {"next: is required", "bad"}}, problems)
}

func TestGraphHostileText(t *testing.T) {
	t.Parallel()
	hostile := []string{
		`"><script>alert(1)</script>`,
		`]]></svg><img src=x onerror=alert(1)>`,
		`<![CDATA[x]]><!-- -->`,
		`' onmouseover='alert(1)`,
		`</title></text></g><foreignObject><body onload=alert(1)>`,
		"&amp;&lt;&#60;\x00\x01\x1b\xff\xfe\ufffe",
	}
	var nodes []*workflow.Node
	branches := map[string]string{}
	problems := map[string][]string{}
	for i, h := range hostile {
		id := fmt.Sprintf("%d%s", i, h)
		branches[h] = id
		problems[id] = []string{h}
		nodes = append(nodes, &workflow.Node{ID: id, Type: h, Name: h, Task: h, ActionType: h, Next: "x" + h})
	}
	nodes = append([]*workflow.Node{{ID: "start", Type: workflow.NodeStart, Next: hostile[0]},
		{ID: hostile[0], Type: workflow.NodeDecision, Branches: branches}}, nodes...)
	out := RenderGraph(nodes, GraphMarks{
		Visited: map[string]bool{hostile[1]: true}, Current: hostile[2], Problems: problems,
	})

	root := parseSVG(t, out)
	allowed := map[string]bool{"svg": true, "defs": true, "marker": true, "clipPath": true, "path": true, "rect": true, "g": true, "text": true, "title": true}
	for _, e := range root.all(func(*svgElement) bool { return true }) {
		require.True(t, allowed[e.name], "element %q", e.name)
		for name := range e.attrs {
			require.False(t, strings.HasPrefix(strings.ToLower(name), "on"), "attribute %q", name)
			require.NotContains(t, name, "href")
		}
	}
	for _, s := range []string{"<script", "<img", "<foreign", "<body", "<!", "]]>", "<?"} {
		require.NotContains(t, string(out), s)
	}
	// The ids come back whole from the attribute they are in.
	groups := nodeGroups(root)
	for i, h := range hostile[:5] {
		require.Len(t, groups[fmt.Sprintf("%d%s", i, h)], 1, h)
	}
	require.Len(t, groups[hostile[0]], 1)
	require.Len(t, root.all(missingBox), len(hostile), "one per next target")
}

func TestGraphLongText(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("very_long_node_id_", 14)
	wide := strings.Repeat("表", 40)
	nodes := []*workflow.Node{
		{ID: "start", Type: workflow.NodeStart, Next: long},
		{ID: long, Type: workflow.NodeTask, Task: wide, Next: "end"},
		{ID: "end", Type: workflow.NodeEnd},
	}
	root := parseSVG(t, RenderGraph(nodes, GraphMarks{}))
	g := nodeGroups(root)[long]
	require.Len(t, g, 1)
	texts := g[0].texts()
	require.True(t, strings.HasSuffix(texts[0], "…"), texts[0])
	require.True(t, strings.HasPrefix(long, strings.TrimSuffix(texts[0], "…")))
	require.LessOrEqual(t, len([]rune(texts[0])), graphIDUnits/2)
	require.True(t, strings.HasSuffix(texts[1], "…"), texts[1])
	require.Less(t, len([]rune(texts[1])), graphKindUnits/4+4, "wide characters count double")
	require.Contains(t, g[0].child("title").text, long, "the title has it whole")
	require.Contains(t, g[0].child("title").text, wide)
	require.Equal(t, nodeGroups(root)["end"][0].child("rect").attrs["width"], g[0].child("rect").attrs["width"], "boxes keep their size")

	short, cut := fitText("decision", graphKindUnits)
	require.Equal(t, "decision", short)
	require.False(t, cut)
}

func TestGraphDeterministic(t *testing.T) {
	t.Parallel()
	branches := map[string]string{}
	for i := range 40 {
		branches[fmt.Sprintf("k%02d", i)] = fmt.Sprintf("n%d", i%7)
	}
	nodes := []*workflow.Node{
		{ID: "start", Type: workflow.NodeStart, Next: "d"},
		{ID: "d", Type: workflow.NodeDecision, Branches: branches},
	}
	for i := range 7 {
		nodes = append(nodes, &workflow.Node{ID: fmt.Sprintf("n%d", i), Type: workflow.NodeDecision,
			Branches: map[string]string{"back": "d", "self": fmt.Sprintf("n%d", i), "on": "end", "lost": "gone"}})
	}
	nodes = append(nodes, &workflow.Node{ID: "end", Type: workflow.NodeEnd})
	marks := GraphMarks{Visited: map[string]bool{"start": true, "d": true}, Current: "n3"}
	first := RenderGraph(nodes, marks)
	for range 20 {
		require.Equal(t, first, RenderGraph(nodes, marks))
	}
	requireApart(t, layoutGraph(nodes))
	parseSVG(t, first)
}
