// Package batonpeer runs the peer bench's Baton figures — the five-node run,
// the resume round trip, one run at a time per conversation (by inbound
// messages and by session-keyed starts) and the River floor — on Baton's own
// database, and checks each round's runs from that database afterwards.
//
// It drives Baton through its engine (engine.StartExecution,
// engine.ReceiveInboundTx, engine.PublishEvent) with internal/benchkit's
// runners, as `baton bench` does. It must not import DBOS or the other
// packages of the peer bench but report.
package batonpeer
