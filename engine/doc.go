// Package engine is Baton's domain: the execution state machine, the step
// runner that advances an execution node by node from its checkpoint, waits,
// thread locks, lanes, tools, and outbound delivery through channel
// adapters. The workflow language it runs (definitions, validation,
// conditions, templates) is package engine/workflow.
//
// Every state transition is compare-and-swap SQL in the transaction that also
// writes the checkpoint, the execution_event rows and the River jobs the
// transition needs. The engine enqueues those jobs through the JobInserter
// interface, which package jobs implements with River's InsertTx.
//
// engine imports db/dbsqlc and engine/workflow, and never imports httpapi or
// jobs.
package engine
