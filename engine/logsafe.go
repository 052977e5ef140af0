package engine

import (
	"errors"
	"fmt"

	"github.com/batonrun/baton/engine/workflow"
)

// Tenant data and the process log.
//
// What a contact wrote, the values of an execution's variables, what a
// template rendered and a tool's answers are a tenant's data. The tenant
// reads them through the API (an execution's error_message, its events);
// the process log, at any level, does not carry them. A log line whose
// error would quote one names the field it was in and its length instead
// ("duration <31 bytes>"): the operator learns which field was wrong and
// how big it was, not what it said. Names — of nodes, variables, tools,
// workflows written in the definition — are not data. A stepFailure's
// logMessage is its message so told; the log takes message itself only
// when it quotes no data.
//
// Levels: a tenant's own failures (a step or a tool that failed, a value
// that does not validate, a timeout) log at WARN; ERROR is kept for
// Baton's own faults (a panic, a database that fails), so that no tenant
// can fill the error log.

// withheld stands, in a log line, for a value of the tenant's data: its
// length in bytes as the tenant would read it.
func withheld(value any) string {
	s, ok := value.(string)
	if !ok {
		s = workflow.RenderText(value)
	}
	return fmt.Sprintf("<%d bytes>", len(s))
}

// conditionLogMessage is what the process log says of a condition that
// did not evaluate: the evaluator's error may quote the values of the
// variables it read, so only its kind and length are told.
func conditionLogMessage(err error) string {
	if errors.Is(err, workflow.ErrConditionCost) {
		return "the condition ran past its cost limit (" + withheld(err.Error()) + " of error text withheld)"
	}
	return "the condition did not evaluate (" + withheld(err.Error()) + " of error text withheld)"
}
