package console

import (
	"container/heap"
	"slices"

	"github.com/batonrun/baton/engine/workflow"
)

// graphBox is one box of the drawing: a node, or a target no node has.
type graphBox struct {
	node  *workflow.Node // nil for a missing target
	id    string
	layer int
	x, y  int // top left corner
}

// top is where an edge enters the box, at dx from its left side.
func (b *graphBox) top(dx int) graphPoint {
	if b.node == nil {
		return graphPoint{b.x + dx, b.y + graphMissingY}
	}
	return graphPoint{b.x + dx, b.y}
}

// label is the box's first line: its node's id.
func (b *graphBox) label() string {
	if b.id == "" {
		return "(no id)"
	}
	return b.id
}

type graphPoint struct{ x, y int }

// graphEdge is one arrow: every way from one box to another, with the keys
// of the branches that take it.
type graphEdge struct {
	from, to int      // box indexes
	keys     []string // the branch keys that take it, in order
	// back is set for an edge to the same or an earlier layer; it runs
	// around the right side of the boxes, in its lane.
	back bool
	lane int
	// points are the ends of a forward edge (drawn as a curve) or the
	// corners of a back edge (drawn as straight runs).
	points []graphPoint
}

// graphLayout is where everything of a drawing goes.
type graphLayout struct {
	boxes []graphBox
	edges []graphEdge
	// order holds the box indexes in the order they were placed, the
	// layers one after the other; walked counts those whose edges are
	// recorded; layers are runs of order.
	order  []int
	walked int
	layers [][]int
	// lanes is how many lanes the back edges take, backEdges how many
	// there are.
	lanes, backEdges int
	byID             map[string]int // a node's first box
	missing          map[string]int // the box of each target no node has
	keys             []string       // a node's branch keys, sorted
	width, height    int
}

// layoutGraph places the boxes and routes the edges; it takes time about
// linear in the nodes and edges.
func layoutGraph(nodes []*workflow.Node) *graphLayout {
	edges := 0
	for _, n := range nodes {
		if n != nil {
			edges += 1 + len(n.Branches)
		}
	}
	g := &graphLayout{
		boxes:   make([]graphBox, 0, len(nodes)),
		edges:   make([]graphEdge, 0, edges),
		order:   make([]int, 0, len(nodes)),
		byID:    make(map[string]int, len(nodes)),
		missing: map[string]int{},
	}
	for _, n := range nodes {
		if n == nil {
			continue
		}
		if _, dup := g.byID[n.ID]; !dup {
			g.byID[n.ID] = len(g.boxes)
		}
		g.boxes = append(g.boxes, graphBox{node: n, id: n.ID, layer: -1})
	}
	if len(g.boxes) == 0 {
		g.width, g.height = 200, 40
		return g
	}
	defined := len(g.boxes)
	root := 0
	for i := range defined {
		if g.boxes[i].node.Type == workflow.NodeStart {
			root = i
			break
		}
	}
	// Breadth first from the root, then the nodes it does not reach in
	// one more layer, their missing targets in the one below.
	g.place(root, 0)
	g.walk()
	unreached := g.boxes[g.order[len(g.order)-1]].layer + 1
	for i := range defined {
		if g.boxes[i].layer < 0 {
			g.place(i, unreached)
		}
	}
	g.walk()
	for start := 0; start < len(g.order); {
		end := start + 1
		for end < len(g.order) && g.boxes[g.order[end]].layer == g.boxes[g.order[start]].layer {
			end++
		}
		g.layers = append(g.layers, g.order[start:end:end])
		start = end
	}
	g.position()
	return g
}

// place puts box i in a layer, after the boxes already there: layers are
// filled in order.
func (g *graphLayout) place(i, layer int) {
	g.boxes[i].layer = layer
	g.order = append(g.order, i)
}

// walk records the edges of the nodes placed and not walked yet, placing
// their targets, until every placed node is walked.
func (g *graphLayout) walk() {
	for ; g.walked < len(g.order); g.walked++ {
		if i := g.order[g.walked]; g.boxes[i].node != nil {
			g.discover(i)
		}
	}
}

// discover records the edges of box i's node, placing in the layer below
// it each target not placed yet.
func (g *graphLayout) discover(i int) {
	n := g.boxes[i].node
	first := len(g.edges)
	var seen map[int]int // edges by target, for a node of many branches
	if len(n.Branches) > 8 {
		seen = make(map[int]int, len(n.Branches)+1)
	}
	if n.Next != "" {
		g.follow(i, g.target(n.Next, i), "", first, seen)
	}
	if len(n.Branches) == 0 {
		return
	}
	g.keys = g.keys[:0]
	for k := range n.Branches {
		g.keys = append(g.keys, k)
	}
	slices.Sort(g.keys)
	for _, k := range g.keys {
		if n.Branches[k] != "" {
			g.follow(i, g.target(n.Branches[k], i), k, first, seen)
		}
	}
}

// target returns the box of the node with an id, or of its missing box,
// placing it in the layer below box i's if it has no layer yet.
func (g *graphLayout) target(id string, i int) int {
	t, ok := g.byID[id]
	if !ok {
		if t, ok = g.missing[id]; ok {
			return t
		}
		t = len(g.boxes)
		g.missing[id] = t
		g.boxes = append(g.boxes, graphBox{id: id})
	} else if g.boxes[t].layer >= 0 {
		return t
	}
	g.place(t, g.boxes[i].layer+1)
	return t
}

// follow records the edge from box i to box t, taken by a branch key or,
// when key is empty, by next; ways to the same box share one edge, found
// among box i's edges from first on, in seen when it is not nil.
func (g *graphLayout) follow(i, t int, key string, first int, seen map[int]int) {
	e, ok := -1, false
	if seen != nil {
		e, ok = seen[t]
	} else {
		for x := first; x < len(g.edges) && !ok; x++ {
			e, ok = x, g.edges[x].to == t
		}
	}
	if !ok {
		if seen != nil {
			seen[t] = len(g.edges)
		}
		e = len(g.edges)
		g.edges = append(g.edges, graphEdge{from: i, to: t})
	}
	if key != "" {
		g.edges[e].keys = append(g.edges[e].keys, key)
	}
}

// sizeHint is about the length of the drawing's markup, a little more.
func (g *graphLayout) sizeHint() int {
	n := 1024
	for _, e := range g.edges {
		n += graphEdgeBytes
		for _, k := range e.keys {
			n += 2 * (len(k) + 2)
		}
		if e.back {
			n += graphBackBytes
		}
	}
	for _, b := range g.boxes {
		n += graphBoxBytes + 3*len(b.id)
		if b.node != nil {
			n += len(b.node.Name) + len(b.node.Task) + len(b.node.ActionType) + len(b.node.Type)
		}
	}
	return n
}

// About the most markup a box and an edge take but for their text.
const (
	graphBoxBytes  = 520
	graphEdgeBytes = 150
	graphBackBytes = 120 // more for a back edge
)

// position sets every box's corner, the lanes of the back edges, the
// edges' points and the drawing's size.
func (g *graphLayout) position() {
	for i := range g.edges {
		e := &g.edges[i]
		e.back = g.boxes[e.to].layer <= g.boxes[e.from].layer
	}
	g.assignLanes()
	widest := 0
	for _, layer := range g.layers {
		widest = max(widest, len(layer))
	}
	content := widest*graphBoxW + (widest-1)*graphHGap
	padY := graphPadY
	if g.lanes > 0 {
		padY = graphLoopY
	}
	for l, layer := range g.layers {
		x := graphSide + (content-(len(layer)*graphBoxW+(len(layer)-1)*graphHGap))/2
		y := padY + l*(graphBoxH+graphVGap)
		for _, i := range layer {
			g.boxes[i].x, g.boxes[i].y = x, y
			x += graphBoxW + graphHGap
		}
	}
	right := graphSide + content
	g.width = right + g.lanes*graphLane + graphSide
	g.height = 2*padY + len(g.layers)*graphBoxH + (len(g.layers)-1)*graphVGap
	// One array holds the points of all edges.
	points := make([]graphPoint, 0, 2*len(g.edges)+4*g.backEdges)
	for i := range g.edges {
		start := len(points)
		points = g.route(&g.edges[i], right, points)
		g.edges[i].points = points[start:len(points):len(points)]
	}
}

// route appends an edge's points: the ends of a forward edge; the corners
// of a back edge, out of the source's bottom into the gap below its layer,
// right to its lane, up to the gap above the target's layer, left, and down
// into the target, for gaps and lanes hold no boxes.
func (g *graphLayout) route(e *graphEdge, right int, points []graphPoint) []graphPoint {
	from, to := &g.boxes[e.from], &g.boxes[e.to]
	if !e.back {
		return append(points, graphPoint{from.x + graphBoxW/2, from.y + graphBoxH}, to.top(graphBoxW/2))
	}
	stagger := graphSlot/2 + (e.lane%graphSlots)*graphSlot
	laneX := right + (e.lane+1)*graphLane
	src := graphPoint{from.x + graphBoxW*3/4, from.y + graphBoxH}
	dst := to.top(graphBoxW * 3 / 4)
	below, above := src.y+stagger, to.y-stagger
	return append(points, src, graphPoint{src.x, below}, graphPoint{laneX, below}, graphPoint{laneX, above}, graphPoint{dst.x, above}, dst)
}

// assignLanes gives each back edge a lane, reusing a lane whose edges are
// done above the layer where the next one starts: the fewest lanes that
// keep vertical runs apart.
func (g *graphLayout) assignLanes() {
	var back []int
	for i := range g.edges {
		if g.edges[i].back {
			back = append(back, i)
		}
	}
	g.backEdges = len(back)
	// An edge takes the gaps from the one above its target's layer to the
	// one below its source's.
	span := func(i int) (int, int) {
		return g.boxes[g.edges[i].to].layer, g.boxes[g.edges[i].from].layer + 1
	}
	slices.SortStableFunc(back, func(a, b int) int {
		ta, _ := span(a)
		tb, _ := span(b)
		return ta - tb
	})
	var busy laneHeap
	for _, i := range back {
		top, bottom := span(i)
		if len(busy) > 0 && busy[0].last < top {
			g.edges[i].lane = busy[0].lane
			busy[0].last = bottom
			heap.Fix(&busy, 0)
			continue
		}
		g.edges[i].lane = g.lanes
		heap.Push(&busy, laneUse{lane: g.lanes, last: bottom})
		g.lanes++
	}
}

// laneUse is a lane and the last gap its edges take.
type laneUse struct{ lane, last int }

// laneHeap orders lanes by the last gap they take, the freest first.
type laneHeap []laneUse

func (h laneHeap) Len() int { return len(h) }
func (h laneHeap) Less(i, j int) bool {
	if h[i].last != h[j].last {
		return h[i].last < h[j].last
	}
	return h[i].lane < h[j].lane
}
func (h laneHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *laneHeap) Push(x any)   { *h = append(*h, x.(laneUse)) }
func (h *laneHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
