// Package pgcluster starts and stops a private PostgreSQL server whose data
// directory it owns, for `baton dev` and for tests on a machine that has the
// PostgreSQL binaries (initdb, pg_ctl) but no running server.
//
// It owns the whole life of that server: finding the binaries, initdb on the
// first start, pg_ctl start and stop, reusing a cluster that is already
// initialized or already running in the same directory, or else starting
// from an empty one and deleting it when done (remove.go), and, when the
// process runs as root, running PostgreSQL as the postgres OS user, which it
// requires. One process at a time owns a data directory and is the only one
// that stops its server; another process may use it as a guest, or is
// refused (owner.go). It only listens on 127.0.0.1 and trusts every local connection,
// so it is for development and tests, never for production.
//
// For failover tests it also makes a primary that waits for a synchronous
// standby, a streaming standby copied from a running primary with
// pg_basebackup, promotes a standby, kills a server the way a crash would,
// and builds the multi-host connection string that finds the primary.
//
// This package must not import any other Baton package: it knows nothing of
// Baton's schema (that is db's job) or of test databases (that is pgtest's).
// It uses only the standard library and pgx.
package pgcluster
