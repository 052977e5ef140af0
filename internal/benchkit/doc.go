// Package benchkit holds the measuring parts that `baton bench` and the peer
// bench (bench/peers) share: a private PostgreSQL server and scratch
// databases, measured windows and closed loops timed by the client's clock,
// latency percentiles, the bare River floor, the terminal watcher, the bench
// workflows and the runners of the five-node figure and the resume round
// trip.
//
// It owns no schema and no state of its own beyond the scratch databases it
// creates and drops. It may import engine, jobs, db and internal/pgcluster;
// it must not import cmd/baton, httpapi or config, and nothing in Baton
// itself (engine, jobs, httpapi) may import it: it is for benchmarks only.
package benchkit
