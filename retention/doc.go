// Package retention removes what Baton no longer needs once its retention
// period has passed, so that its tables stop growing with traffic: ended
// executions with their event log and messages, request message_ids and
// event_ids past their replay window, settled inbound messages that no
// execution owns, and console sessions that have expired (whatever the
// policy: a session carries its own expiry, at most 12 hours after it
// started).
//
// A Sweeper does it in batches (db/queries/retention.sql): each batch is
// one statement that takes up to Config.Batch expired rows with FOR UPDATE
// SKIP LOCKED and deletes them, so no transaction is long, no lock is held
// between batches, and any number of sweeps, in any number of processes,
// may run at once, each row removed by one of them. A sweep goes on until
// a batch finds nothing or its time budget is spent; the periodic
// retention.sweep River job (package jobs) runs one every Config.Interval.
//
// Batched deletes rather than time-partitioned tables: a live execution
// that waits for days has events in every day's partition, so a day's
// partition could rarely be dropped without removing the log of an
// execution still running; a batched delete removes exactly what expired.
//
// What a sweep never removes: a live execution (pending, running,
// waiting); an ended execution any other execution refers to (a child, a
// restart, a lock inherited from it), so the parent chain of a live
// execution stays whole and a family goes leaves first; an ended execution
// that holds, or is recorded as holding, a thread lock; one with an
// outbound message not yet delivered or an inbound message still steered
// to it; one whose result callback is still being delivered; an inbound
// message still queued; an event buffered for a live execution that has
// not taken it. Threads, lanes and workflow definitions are never removed.
//
// retention imports db/dbsqlc only; package jobs runs it, config builds its
// Config.
package retention
