package workflow

import "fmt"

// Problem is one reason a workflow definition is invalid.
type Problem struct {
	// NodeID is the id of the node at fault, empty for the definition itself.
	NodeID string `json:"node_id"`
	// Field is the field at fault, such as "next" or "parameters.timeout".
	Field string `json:"field"`
	// Message says what is wrong.
	Message string `json:"message"`
}

// ValidationError lists every problem found in a workflow definition.
type ValidationError struct {
	// Problems are the problems found, in node order.
	Problems []Problem
}

func (e *ValidationError) Error() string {
	if len(e.Problems) == 0 {
		return "invalid workflow definition"
	}
	p := e.Problems[0]
	msg := "invalid workflow definition: "
	if p.NodeID != "" {
		msg += "node " + p.NodeID + ": "
	}
	msg += p.Field + ": " + p.Message
	if n := len(e.Problems) - 1; n > 0 {
		msg += fmt.Sprintf(" (and %d more)", n)
	}
	return msg
}
