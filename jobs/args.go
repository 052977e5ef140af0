package jobs

import "encoding/json"

// Queues Baton's jobs run in.
const (
	QueueHigh   = "high"
	QueueMedium = "medium"
	QueueLow    = "low"
)

// StepArgs advance an execution from one checkpoint.
type StepArgs struct {
	// ExecutionID is the execution's row id.
	ExecutionID int64 `json:"execution_id"`
	// StepSeq is the checkpoint the job expects; a job whose checkpoint is
	// no longer current does nothing.
	StepSeq int64 `json:"step_seq"`
}

// Kind is the job kind River UI shows.
func (StepArgs) Kind() string { return "execution.step" }

// DeliverArgs deliver a thread's pending outbound messages in order.
type DeliverArgs struct {
	// ThreadID is the thread's row id.
	ThreadID int64 `json:"thread_id"`
}

// Kind is the job kind River UI shows.
func (DeliverArgs) Kind() string { return "message.deliver" }

// DrainArgs hand a thread's queued messages out in FIFO order once its lock
// is free.
type DrainArgs struct {
	// ThreadID is the thread's row id.
	ThreadID int64 `json:"thread_id"`
}

// Kind is the job kind River UI shows.
func (DrainArgs) Kind() string { return "thread.drain" }

// LockReapArgs clear stale and orphan thread locks and drain their threads.
type LockReapArgs struct{}

// Kind is the job kind River UI shows.
func (LockReapArgs) Kind() string { return "thread.lock_reap" }

// StepReapArgs enqueue the lost step jobs of running executions again, or
// fail the executions that lost theirs too often (engine.ReapSteps).
type StepReapArgs struct{}

// Kind is the job kind River UI shows.
func (StepReapArgs) Kind() string { return "execution.step_reap" }

// DeliverReapArgs enqueue the delivery of messages left pending without a
// deliverer (engine.ReapOutboxes).
type DeliverReapArgs struct{}

// Kind is the job kind River UI shows.
func (DeliverReapArgs) Kind() string { return "message.deliver_reap" }

// WaitTimeoutArgs fire the timeout of one wait of an execution. The
// transaction that ends the wait before then deletes the job.
type WaitTimeoutArgs struct {
	// ExecutionID is the execution's row id, by which the job finds it.
	ExecutionID int64 `json:"execution_id"`
	// WaitSeq is the wait the job belongs to; a job of an older wait (the
	// execution resumed, or retried its wait) does nothing.
	WaitSeq int32 `json:"wait_seq"`
	// TenantID and Execution name the execution as the API, the console
	// and the logs do (Execution is its exec-… id), for whoever reads the
	// job in River UI. Jobs enqueued by builds before them lack both; the
	// job never needs them.
	TenantID  string `json:"tenant_id,omitempty"`
	Execution string `json:"execution,omitempty"`
}

// Kind is the job kind River UI shows.
func (WaitTimeoutArgs) Kind() string { return "execution.wait_timeout" }

// CallbackArgs post a callback to an execution's callback_url
// (engine.CallbackJob): its result, an input request, a status change or
// an error.
type CallbackArgs struct {
	// ExecutionID is the execution's row id.
	ExecutionID int64 `json:"execution_id"`
	// MessageID is the callback's message_id, the same on every retry so
	// that a receiver can drop repeated deliveries.
	MessageID string `json:"message_id"`
	// InputRequestWaitSeq, when set, makes this the input request of that
	// wait rather than the execution's result.
	InputRequestWaitSeq int32 `json:"input_request_wait_seq,omitempty"`
	// Event is "status" or "error" for those callbacks, whose Payload was
	// taken when the change happened.
	Event string `json:"event,omitempty"`
	// Payload is a status or error callback's content.
	Payload json.RawMessage `json:"payload,omitempty"`
}

// Kind is the job kind River UI shows.
func (CallbackArgs) Kind() string { return "workflow.callback" }

// LaneDispatchArgs admit a lane's pending executions while it has room.
type LaneDispatchArgs struct {
	// Owner is the tenant owning the lane; empty for a global lane (one the
	// operator configured), shared by all tenants.
	Owner string `json:"owner,omitempty"`
	// Lane is the lane's name.
	Lane string `json:"lane"`
}

// Kind is the job kind River UI shows.
func (LaneDispatchArgs) Kind() string { return "lane.dispatch" }

// LaneSweepArgs re-arm lost lane dispatches and session flushes.
type LaneSweepArgs struct{}

// Kind is the job kind River UI shows.
func (LaneSweepArgs) Kind() string { return "lane.sweep" }

// SessionFlushArgs start a session's next run from its queued inbound
// messages once it is idle and its debounce window has passed.
type SessionFlushArgs struct {
	TenantID string `json:"tenant_id"`
	// ThreadID is the thread's external id (the session is
	// "session:<thread id>").
	ThreadID string `json:"thread_id"`
}

// Kind is the job kind River UI shows.
func (SessionFlushArgs) Kind() string { return "session.flush" }
