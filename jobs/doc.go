// Package jobs holds Baton's River job args and workers, and the River client
// settings Baton runs with. Workers are thin: each calls the engine, which
// does the work in a transaction that also completes the job.
//
// jobs imports engine, retention and River; engine never imports jobs: it
// enqueues through the engine.JobInserter interface, which Inserter
// implements with River's InsertTx.
package jobs
