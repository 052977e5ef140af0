package metrics

import (
	"sync"

	"github.com/batonrun/baton/engine"
)

// Other is the label value that stands for every value past a label's
// cap, and for every lane that is not built in.
const Other = "other"

// DefaultLabelValues is how many distinct workflow_id values, and
// workflow_id/step_id pairs, each metric keeps by default.
const DefaultLabelValues = 100

// labelCap bounds the distinct values one label of one metric takes: the
// first max values seen by this process keep their name, later ones are
// counted as Other. A value once kept stays kept, so a series never moves.
type labelCap struct {
	mu   sync.Mutex
	max  int
	seen map[string]struct{}
}

func newLabelCap(max int) *labelCap {
	return &labelCap{max: max, seen: make(map[string]struct{}, max)}
}

// value returns v when it is kept (already, or now that there is room),
// else Other.
func (c *labelCap) value(v string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.seen[v]; ok {
		return v
	}
	if len(c.seen) >= c.max {
		return Other
	}
	c.seen[v] = struct{}{}
	return v
}

// stepLabels bounds a metric labelled by workflow_id and step_id: at most
// max workflow ids and max (workflow_id, step_id) pairs. A pair past the
// cap keeps its (capped) workflow_id and has step_id Other, so the metric
// has at most 2·max+1 series whatever tenants name their workflows and
// nodes.
type stepLabels struct {
	workflows *labelCap
	pairs     *labelCap
}

func newStepLabels(max int) *stepLabels {
	return &stepLabels{workflows: newLabelCap(max), pairs: newLabelCap(max)}
}

// values returns the workflow_id and step_id labels of a step.
func (s *stepLabels) values(workflowID, stepID string) (string, string) {
	wf := s.workflows.value(workflowID)
	if wf == Other {
		return Other, Other
	}
	if s.pairs.value(wf+"\x00"+stepID) == Other {
		return wf, Other
	}
	return wf, stepID
}

// laneLabel is a lane's label: a built-in lane's name, else Other (custom
// lanes are named by tenants, and session lanes by thread ids).
func laneLabel(lane string) string {
	switch lane {
	case engine.LaneMain, engine.LaneSubagent, engine.LaneCron:
		return lane
	}
	return Other
}
