// Package dbospeer runs the peer bench's DBOS Transact (Go) figures — the
// five-node run written two ways, the resume round trip through Send and
// Recv, and one run at a time per conversation through a partitioned queue —
// on DBOS's own database, and checks each round's workflows afterwards.
//
// Each figure launches a DBOS context of its own on a pool of its own (DBOS
// closes the pool at Shutdown), as each Baton figure starts its own River
// client. The application's one table, bench_outbound, lives in the same
// database as DBOS's system tables, and the transactional steps use that
// database's pool, so DBOS writes the row and its checkpoint in one
// transaction. It must not import Baton or the other packages of the peer
// bench but report.
package dbospeer
