package engine

// SharedAdmissions is how many runs this engine found room for in share
// mode (lane_shared.go), counted whether or not their transaction went on
// to commit.
func (e *Engine) SharedAdmissions() int64 { return e.sharedAdmissions.Load() }
