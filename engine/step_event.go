package engine

import (
	"fmt"
	"time"

	"github.com/batonrun/baton/engine/workflow"
)

// A step's event: every node a run finishes is on its path and in a
// workflow.step_update event.

// stepUpdate is the payload of a workflow.step_update event
// (WorkflowStepUpdatePayload in httpapi/openapi.yaml). It is a struct, not
// a map, because a run writes one per node: encoding/json encodes it
// without sorting keys through reflection, and the run allocates a
// fraction of what the maps cost (BenchmarkSettlingStart). An optional
// field is left out while unset; StepResult is present, as null, when it
// is set to a nil map.
type stepUpdate struct {
	StepID                string       `json:"step_id"`
	NodeType              string       `json:"node_type"`
	ActionType            string       `json:"action_type,omitempty"`
	Status                string       `json:"status"`
	NextNode              *string      `json:"next_node"` // null at an end
	DecisionMade          string       `json:"decision_made,omitempty"`
	StepResult            any          `json:"step_result,omitempty"`
	WaitingFor            *string      `json:"waiting_for,omitempty"`
	NotificationMessageID any          `json:"notification_message_id,omitempty"`
	DurationMS            *int64       `json:"duration_ms,omitempty"`
	CompletedSteps        int          `json:"completed_steps"`
	TotalSteps            int          `json:"total_steps"`
	ProgressPercentage    float64      `json:"progress_percentage"`
	Progress              stepProgress `json:"progress"`
}

// stepProgress is a step_update's progress object.
type stepProgress struct {
	CurrentStep int     `json:"current_step"`
	TotalSteps  int     `json:"total_steps"`
	Percentage  float64 `json:"percentage"`
}

// record appends a finished node to the path and writes its step event.
func (r *stepRun) record(node *workflow.Node, next string, payload *stepUpdate) {
	r.path = append(r.path, node.ID)
	r.steps++
	total := r.steps + r.def.Remaining(next)
	if next != "" {
		payload.NextNode = &next
	}
	payload.Status = "completed"
	payload.CompletedSteps, payload.TotalSteps = r.steps, total
	payload.ProgressPercentage = percentage(r.steps, total)
	payload.Progress = stepProgress{CurrentStep: r.steps, TotalSteps: total, Percentage: payload.ProgressPercentage}
	label := node.Type
	if node.ActionType != "" {
		label = node.ActionType
	}
	if !r.nodeStart.IsZero() {
		duration := time.Since(r.nodeStart)
		ms := duration.Milliseconds()
		payload.DurationMS = &ms
		workflowID, stepID := r.row.WorkflowID, node.ID
		r.events.after.add(func(m Metrics) { m.StepFinished(workflowID, stepID, duration) })
	}
	r.events.addValue(EventStepUpdate, "info", node.ID, fmt.Sprintf("Step %d: %s %s completed", r.steps, label, node.ID), payload)
}

// percentage is done of total, in percent, truncated to two decimals.
func percentage(done, total int) float64 {
	if total <= 0 {
		return 0
	}
	return float64(int(float64(done)*10000/float64(total))) / 100
}
