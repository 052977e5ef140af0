package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/engine/workflow"
)

// ExecutionStatus is an execution's state.
type ExecutionStatus = dbsqlc.ExecutionStatus

// Execution states (status in docs/api.md, "Execution").
const (
	StatusPending   = dbsqlc.ExecutionStatusPending
	StatusRunning   = dbsqlc.ExecutionStatusRunning
	StatusWaiting   = dbsqlc.ExecutionStatusWaiting
	StatusCompleted = dbsqlc.ExecutionStatusCompleted
	StatusFailed    = dbsqlc.ExecutionStatusFailed
	StatusTimeout   = dbsqlc.ExecutionStatusTimeout
	StatusCancelled = dbsqlc.ExecutionStatusCancelled
)

// IsTerminal reports whether an execution in this state can never change.
func IsTerminal(s ExecutionStatus) bool {
	switch s {
	case StatusCompleted, StatusFailed, StatusTimeout, StatusCancelled:
		return true
	}
	return false
}

// Execution is an execution as clients see it.
type Execution struct {
	// ID is the row id.
	ID                int64
	TenantID          string
	ExecutionID       string
	WorkflowID        string
	Version           string
	Status            ExecutionStatus
	Lane              string
	ThreadID          string
	ParentExecutionID *string
	RestartedFrom     *string
	CurrentNodeID     *string
	CurrentStepAt     *time.Time
	NodePath          []string
	StepsCompleted    int
	TotalSteps        int
	StepSeq           int64
	WaitingFor        *string
	WaitingUntil      *time.Time
	WaitingData       json.RawMessage
	Variables         map[string]any
	ResultType        *string
	ResultSummary     *string
	Result            json.RawMessage
	ErrorCode         *string
	ErrorMessage      *string
	FailedNodeID      *string
	// ErrorDetailsJSON holds retryable, retry_after_ms and the tool's
	// diagnosis of a failure; see ErrorDetails.
	ErrorDetailsJSON json.RawMessage
	// IdempotencyKey is the message_id of the request that started it.
	IdempotencyKey *string
	// Priority is the envelope's priority, 0 to 10.
	Priority      int
	CancelledBy   *string
	CancelReason  *string
	CorrelationID string
	CreatedAt     time.Time
	StartedAt     *time.Time
	UpdatedAt     time.Time
	CompletedAt   *time.Time
}

// Percentage is the execution's progress: steps completed over steps
// completed plus the shortest remaining path to an end node.
func (x *Execution) Percentage() float64 {
	if x.TotalSteps <= 0 {
		return 0
	}
	if x.Status == StatusCompleted {
		return 100
	}
	return float64(int(float64(x.StepsCompleted)*10000/float64(x.TotalSteps))) / 100
}

// executionFromRow is the execution a row holds. Variables that do not
// decode read as nil: the execution stays visible, and its next step fails
// it for them (the row itself is never rewritten to hide them).
func executionFromRow(r *dbsqlc.AgentExecution, threadKey string, parentKey, restartedKey *string) *Execution {
	x := &Execution{
		ID: r.ID, TenantID: r.TenantID, ExecutionID: r.ExecutionID, WorkflowID: r.WorkflowID,
		Version: r.Version, Status: r.Status, Lane: r.Lane, ThreadID: threadKey,
		ParentExecutionID: parentKey, RestartedFrom: restartedKey,
		CurrentNodeID: r.CurrentNodeID, CurrentStepAt: r.CurrentStepStartedAt,
		NodePath: r.NodePath, StepsCompleted: int(r.StepsCompleted), TotalSteps: int(r.TotalSteps),
		StepSeq: r.StepSeq, WaitingFor: r.WaitingFor, WaitingUntil: r.WaitingUntil, WaitingData: r.WaitingData,
		ResultType: r.ResultType, ResultSummary: r.ResultSummary, Result: r.Result,
		ErrorCode: r.ErrorCode, ErrorMessage: r.ErrorMessage, FailedNodeID: r.FailedNodeID,
		ErrorDetailsJSON: r.ErrorDetails, IdempotencyKey: r.IdempotencyKey, Priority: int(r.Priority),
		CancelledBy: r.CancelledBy, CancelReason: r.CancelReason, CorrelationID: r.CorrelationID,
		CreatedAt: r.CreatedAt, StartedAt: r.StartedAt, UpdatedAt: r.UpdatedAt, CompletedAt: r.CompletedAt,
	}
	if vars, err := decodeVariables(r.Variables); err == nil {
		x.Variables = vars
	}
	if x.NodePath == nil {
		x.NodePath = []string{}
	}
	return x
}

// decodeVariables decodes an execution's variables document, which must be
// a JSON object. An empty document is no variables.
func decodeVariables(raw []byte) (workflow.Variables, error) {
	vars := workflow.Variables{}
	if err := jsonUnmarshal(raw, &vars); err != nil {
		return nil, fmt.Errorf("variables are not valid JSON: %w", err)
	}
	if vars == nil {
		return nil, errors.New("variables are not valid JSON: want an object, got null")
	}
	return vars, nil
}
