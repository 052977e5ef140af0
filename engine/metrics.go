package engine

import "time"

// Metrics receives the engine's in-process measurements for /metrics. The
// engine calls it only after the transaction that made a transition has
// committed, except for CancelTx, whose transaction belongs to the caller and
// which reports when the cancellation is written. Implementations must be
// safe for concurrent use and must not block. Package metrics implements it
// with Prometheus; the engine itself imports no metrics library.
type Metrics interface {
	// ExecutionFinished reports an execution that reached a terminal status,
	// with the time from its creation to its end.
	ExecutionFinished(workflowID string, status ExecutionStatus, duration time.Duration)
	// StepFinished reports one node run, with how long it took (for a task,
	// including its tool call).
	StepFinished(workflowID, stepID string, duration time.Duration)
	// Error reports an execution that failed with an error code.
	Error(code string)
	// Retry reports a step that runs again after a failed attempt.
	Retry(workflowID, stepID string)
}

// noMetrics is the Metrics of an engine configured without one.
type noMetrics struct{}

func (noMetrics) ExecutionFinished(string, ExecutionStatus, time.Duration) {}
func (noMetrics) StepFinished(string, string, time.Duration)               {}
func (noMetrics) Error(string)                                             {}
func (noMetrics) Retry(string, string)                                     {}

// observations are the measurements of one transaction, reported once it
// has committed.
type observations []func(Metrics)

func (o *observations) add(fn func(Metrics)) { *o = append(*o, fn) }

func (o observations) report(m Metrics) {
	for _, fn := range o {
		fn(m)
	}
}
