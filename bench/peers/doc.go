// Command peers is the peer bench: Baton against DBOS Transact for Go on one
// PostgreSQL server, each in a database of its own, in interleaved rounds
// (round i: every Baton figure, then every DBOS figure), with every round's
// runs checked for correctness. It prints a markdown table of medians and
// same-round ratios, or JSON with every round.
//
// It is a module of its own so that Baton's module never depends on DBOS;
// it drives Baton through internal/benchkit, as `baton bench` does.
//
//	go run . --rounds 5 --duration 10s --warmup 2s
package main
