package console

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine/workflow"
)

// layerIDs returns the ids in each layer of a layout, a missing target's
// as "missing:<id>".
func layerIDs(g *graphLayout) [][]string {
	out := make([][]string, len(g.layers))
	for l, layer := range g.layers {
		for _, i := range layer {
			id := g.boxes[i].id
			if g.boxes[i].node == nil {
				id = "missing:" + id
			}
			out[l] = append(out[l], id)
		}
	}
	return out
}

// edgeNames returns "from->to" for each edge of a layout, with its label
// and "back" when it is one.
func edgeNames(g *graphLayout) []string {
	var out []string
	for _, e := range g.edges {
		s := g.boxes[e.from].id + "->" + g.boxes[e.to].id
		if len(e.keys) > 0 {
			s += " [" + strings.Join(e.keys, ", ") + "]"
		}
		if e.back {
			s += " back"
		}
		out = append(out, s)
	}
	return out
}

// requireApart checks that no two boxes overlap, that every box is inside
// the drawing, and that no back edge runs across a box.
func requireApart(t *testing.T, g *graphLayout) {
	t.Helper()
	type rect struct{ x0, y0, x1, y1 int }
	var boxes []rect
	for _, b := range g.boxes {
		r := rect{b.x, b.y, b.x + graphBoxW, b.y + graphBoxH}
		if b.node == nil {
			r = rect{r.x0 + graphMissingX, r.y0 + graphMissingY, r.x1 - graphMissingX, r.y1 - graphMissingY}
		}
		require.True(t, r.x0 >= 0 && r.y0 >= 0 && r.x1 <= g.width && r.y1 <= g.height, "box %q inside the drawing", b.id)
		for _, o := range boxes {
			if r.x0 < o.x1 && o.x0 < r.x1 && r.y0 < o.y1 && o.y0 < r.y1 {
				t.Fatalf("box %q overlaps another", b.id)
			}
		}
		boxes = append(boxes, r)
	}
	for _, e := range g.edges {
		for _, p := range e.points {
			require.True(t, p.x >= 0 && p.y >= 0 && p.x <= g.width && p.y <= g.height, "edge inside the drawing")
		}
		if !e.back {
			continue
		}
		for k := 1; k < len(e.points); k++ {
			a, b := e.points[k-1], e.points[k]
			require.True(t, a.x == b.x || a.y == b.y, "back edges run straight across or down")
			seg := rect{min(a.x, b.x), min(a.y, b.y), max(a.x, b.x), max(a.y, b.y)}
			for _, r := range boxes {
				// A segment crosses a box when it enters its inside; the
				// ends touch their boxes' sides.
				if seg.x0 < r.x1 && r.x0 < seg.x1 && seg.y0 < r.y1 && r.y0 < seg.y1 {
					t.Fatalf("back edge %s->%s crosses a box", g.boxes[e.from].id, g.boxes[e.to].id)
				}
			}
		}
	}
}

// limitNodes builds a definition of as many nodes as the limits allow: a
// chain of actions and tasks with a decision every fifth node that loops
// back or goes on, ids of the longest length on every tenth node.
func limitNodes() []*workflow.Node {
	n := workflow.DefaultLimits().Nodes
	id := func(i int) string {
		if i%10 == 9 {
			return fmt.Sprintf("%0*d", workflow.DefaultLimits().IDBytes, i)
		}
		return fmt.Sprintf("node-%d", i)
	}
	nodes := []*workflow.Node{{ID: id(0), Type: workflow.NodeStart, Next: id(1)}}
	for i := 1; i < n-1; i++ {
		switch i % 5 {
		case 0:
			nodes = append(nodes, &workflow.Node{ID: id(i), Type: workflow.NodeDecision,
				Branches: map[string]string{"again": id(max(1, i-3)), "on": id(i + 1)}})
		case 1:
			nodes = append(nodes, &workflow.Node{ID: id(i), Type: workflow.NodeTask, Task: "fetch", Next: id(i + 1)})
		default:
			nodes = append(nodes, &workflow.Node{ID: id(i), Type: workflow.NodeAction, ActionType: workflow.ActionSendMessage, Next: id(i + 1)})
		}
	}
	return append(nodes, &workflow.Node{ID: id(n - 1), Type: workflow.NodeEnd})
}

func limitMarks(nodes []*workflow.Node) GraphMarks {
	marks := GraphMarks{Visited: map[string]bool{}, Problems: map[string][]string{}}
	for i, n := range nodes[:len(nodes)/2] {
		marks.Visited[n.ID] = true
		if i%50 == 0 {
			marks.Problems[n.ID] = []string{"parameters.message: is required (a string)"}
		}
	}
	marks.Current = nodes[len(nodes)/2].ID
	return marks
}

func TestGraphAtTheLimit(t *testing.T) {
	t.Parallel()
	nodes := limitNodes()
	g := layoutGraph(nodes)
	require.Len(t, g.layers, len(nodes), "a chain: one node per layer")
	require.Equal(t, 1, g.lanes, "the loops do not overlap")
	requireApart(t, g)
	root := parseSVG(t, RenderGraph(nodes, limitMarks(nodes)))
	require.Len(t, nodeGroups(root), len(nodes))

	fan := limitFan()
	g = layoutGraph(fan)
	require.Len(t, g.layers, 3)
	require.Len(t, g.layers[2], len(fan)-2)
	require.Equal(t, len(fan)-3, g.backEdges)
	root = parseSVG(t, RenderGraph(fan, limitMarks(fan)))
	require.Len(t, nodeGroups(root), len(fan))
}

// limitFan builds a definition of as many nodes as the limits allow, one
// decision fanning out to all of them: one layer as wide as can be, every
// node going back to the decision.
func limitFan() []*workflow.Node {
	n := workflow.DefaultLimits().Nodes
	branches := map[string]string{}
	nodes := []*workflow.Node{{ID: "start", Type: workflow.NodeStart, Next: "fan"}, nil}
	for i := range n - 3 {
		id := fmt.Sprintf("node-%d", i)
		branches[id] = id
		nodes = append(nodes, &workflow.Node{ID: id, Type: workflow.NodeAction, ActionType: workflow.ActionSendMessage, Next: "fan"})
	}
	branches["zz-done"] = "end"
	nodes[1] = &workflow.Node{ID: "fan", Type: workflow.NodeDecision, Branches: branches}
	return append(nodes, &workflow.Node{ID: "end", Type: workflow.NodeEnd})
}

func BenchmarkRenderGraph(b *testing.B) {
	for _, shape := range []struct {
		name  string
		nodes []*workflow.Node
	}{{"chain", limitNodes()}, {"fan", limitFan()}} {
		b.Run(shape.name, func(b *testing.B) {
			marks := limitMarks(shape.nodes)
			var size int
			for b.Loop() {
				size = len(RenderGraph(shape.nodes, marks))
			}
			b.ReportMetric(float64(size), "bytes/graph")
		})
	}
}
