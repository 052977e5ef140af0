package dbospeer

import (
	"context"
	"fmt"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
)

// Workflow names.
const (
	wfSteps = "five-steps"
	wfTx    = "five-tx"
	wfWait  = "wait"
)

// Input is a five-node workflow's input: what Baton's FiveNodeInput holds,
// and the partition key of a queued run ("" outside a queue).
type Input struct {
	Name   string `json:"name"`
	Visits int    `json:"visits"`
	Key    string `json:"key,omitempty"`
}

// benchInput is the input of a run that visits all five nodes.
func benchInput(key string) Input { return Input{Name: "Ana", Visits: 2, Key: key} }

// summary is what a run that visited all five nodes returns.
const summary = "Saludo enviado a Ana"

// sqlSend is the send node's write: the outbound message row.
const sqlSend = `INSERT INTO bench_outbound (workflow_id, body) VALUES ($1, $2)`

// enter counts the workflow in for its partition key and returns what
// leaves it; a second workflow of a key inside at once is an overlap.
func (rt *runtime) enter(key string) func() {
	live, ok := rt.live[key]
	if !ok {
		return func() {}
	}
	if live.Add(1) > 1 {
		rt.overlaps.Add(1)
	}
	return func() { live.Add(-1) }
}

// send is the send node as a transactional step: the outbound row and the
// step's checkpoint commit together.
func (rt *runtime) send(ctx dbos.Context, body string) error {
	id, err := dbos.GetWorkflowID(ctx)
	if err != nil {
		return err
	}
	_, err = dbos.RunAsTransaction(ctx, rt.ds, func(ctx context.Context, tx dbos.Tx) (int64, error) {
		r, err := tx.Exec(ctx, sqlSend, id, body)
		if err != nil {
			return 0, err
		}
		return r.RowsAffected()
	}, dbos.WithStepName("send"))
	return err
}

// stepsWorkflow is the five nodes, one DBOS step each: start,
// set_variables, decision and end as RunAsStep, the send as a transactional
// step.
func (rt *runtime) stepsWorkflow(ctx dbos.Context, in Input) (string, error) {
	defer rt.enter(in.Key)()
	vars, err := dbos.RunAsStep(ctx, func(context.Context) (map[string]string, error) {
		return map[string]string{"name": in.Name}, nil
	}, dbos.WithStepName("start"))
	if err != nil {
		return "", err
	}
	greeting, err := dbos.RunAsStep(ctx, func(context.Context) (string, error) {
		return "Hola " + vars["name"], nil
	}, dbos.WithStepName("set_variables"))
	if err != nil {
		return "", err
	}
	sends, err := dbos.RunAsStep(ctx, func(context.Context) (bool, error) {
		return in.Visits > 1, nil
	}, dbos.WithStepName("decision"))
	if err != nil {
		return "", err
	}
	if sends {
		if err := rt.send(ctx, greeting+", qué gusto verte"); err != nil {
			return "", err
		}
	}
	return dbos.RunAsStep(ctx, func(context.Context) (string, error) {
		return "Saludo enviado a " + vars["name"], nil
	}, dbos.WithStepName("end"))
}

// txWorkflow is the five nodes as DBOS users write them: set-variable and
// decision as plain Go, one transactional step doing the work.
func (rt *runtime) txWorkflow(ctx dbos.Context, in Input) (string, error) {
	defer rt.enter(in.Key)()
	greeting := "Hola " + in.Name
	if in.Visits > 1 {
		if err := rt.send(ctx, greeting+", qué gusto verte"); err != nil {
			return "", err
		}
	}
	return "Saludo enviado a " + in.Name, nil
}

// waitWorkflow blocks in Recv until its message comes, then runs one step
// and ends.
func (rt *runtime) waitWorkflow(ctx dbos.Context, _ string) (string, error) {
	rt.inRecv.Add(1)
	msg, err := dbos.Recv[string](ctx, "go", time.Hour)
	if err != nil {
		return "", err
	}
	if msg != "go" {
		return "", fmt.Errorf("received %q, not go", msg)
	}
	return dbos.RunAsStep(ctx, func(context.Context) (string, error) {
		return "resumed", nil
	}, dbos.WithStepName("note"))
}
