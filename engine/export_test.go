package engine

// SharedAdmissions is how many runs this engine found room for in share
// mode (lane_shared.go), counted whether or not their transaction went on
// to commit.
func (e *Engine) SharedAdmissions() int64 { return e.sharedAdmissions.Load() }

// PromptBatches is how many prompt-delivery batches this engine claimed and
// how many threads they delivered (deliver_prompt.go); zeros when prompt
// delivery is off.
func (e *Engine) PromptBatches() (batches, threads int64) {
	p := e.prompt.Load()
	if p == nil {
		return 0, 0
	}
	return p.batches.Load(), p.threads.Load()
}

// OutboxLockBase is the high half of a thread's outbox lock key.
const OutboxLockBase = outboxLockBase
