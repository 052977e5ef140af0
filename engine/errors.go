package engine

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ErrNotFound is returned when a definition, execution or thread does not
// exist for the caller's tenant. Another tenant's resource is not found too.
var ErrNotFound = errors.New("not found")

// ConflictError says a request collides with what is already stored: a
// definition version stored with other content, or an execution_id in use.
type ConflictError struct {
	// Code is the machine-readable error code, such as
	// "workflow.define.version_conflict".
	Code string
	// Message explains the conflict.
	Message string
	// Details, when set, are the error's details for a client, such as
	// the field at fault.
	Details map[string]any
}

func (e *ConflictError) Error() string { return e.Message }

// TransitionError is returned when a state transition lost its
// compare-and-swap: the execution was no longer in a state that allows it.
// Nothing was changed.
type TransitionError struct {
	// ExecutionID is the execution's external id.
	ExecutionID string
	// Transition names what was tried, such as "cancel" or "step".
	Transition string
	// Status is the state the execution was found in, when known.
	Status ExecutionStatus
}

func (e *TransitionError) Error() string {
	if e.Status == "" {
		return fmt.Sprintf("execution %s: %s lost its race: the execution moved on", e.ExecutionID, e.Transition)
	}
	return fmt.Sprintf("execution %s: cannot %s an execution that is %s", e.ExecutionID, e.Transition, e.Status)
}

// IsTransitionError reports whether err is a lost transition.
func IsTransitionError(err error) bool {
	var te *TransitionError
	return errors.As(err, &te)
}

// InputError is a request whose input cannot be used, such as an execute
// payload without workflow_id.
type InputError struct {
	// Field is the payload field at fault.
	Field string
	// Message says what is wrong.
	Message string
}

func (e *InputError) Error() string { return e.Field + ": " + e.Message }

// notFound normalises pgx.ErrNoRows to ErrNotFound.
func notFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	return err
}
