package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/internal/pipetx"
)

// Outages and transaction retries.
//
// A database that restarts, fails over, refuses connections or turns
// read-only is an outage, not a bug: IsUnavailable recognises its errors,
// withTx runs a transaction that met one before its COMMIT again (a
// bounded number of times), and the HTTP API answers what is left with
// 503 workflow.service.unavailable, retryable, and Retry-After.

// txAttempts is how many times withTx runs a transaction, the first
// included, while it fails with an error IsUnavailable reports before its
// COMMIT.
const txAttempts = 3

// txRetryDelays are the pauses before the second and third attempts; each
// is jittered to between half and one and a half times its value, so that
// transactions that deadlocked each other do not meet again in step.
var txRetryDelays = [txAttempts - 1]time.Duration{20 * time.Millisecond, 50 * time.Millisecond}

// IsUnavailable reports whether err says the database cannot serve now but
// may soon, so that the same request can succeed when tried again:
//
//   - a connection that could not be made (*pgconn.ConnectError), unless
//     the server refused it for a reason that lasts (a wrong password, a
//     database that does not exist), or that was lost: a network error,
//     io.ErrUnexpectedEOF (the server hung up), pgconn.ErrConnClosed (a
//     connection pgx had already closed), a network timeout
//     (pgconn.Timeout);
//   - SQLSTATE class 08 (connection exception); 57P01 admin_shutdown,
//     57P02 crash_shutdown, 57P03 cannot_connect_now (a server stopping,
//     crashed, or starting up); 25006 read_only_sql_transaction (a
//     standby, or a primary being demoted); 53300 too_many_connections;
//     40001 serialization_failure and 40P01 deadlock_detected.
//
// The caller's own context ending (context.Canceled, DeadlineExceeded) is
// not an outage, nor is an HTTP client's error (*url.Error). pgx's
// pgconn.SafeToRetry is not used as such: every error it calls safe to
// retry is covered above except "conn busy", which is a bug (one
// connection used by two goroutines), not an outage.
func IsUnavailable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return false
	}
	// A server's answer says what it is, even inside a ConnectError.
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return unavailableState(pgErr.Code)
	}
	var (
		connectErr *pgconn.ConnectError
		netErr     net.Error
	)
	return errors.As(err, &connectErr) ||
		errors.As(err, &netErr) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) ||
		pgconn.Timeout(err)
}

// unavailableState reports whether a SQLSTATE is one IsUnavailable names.
func unavailableState(code string) bool {
	switch code {
	case "57P01", "57P02", "57P03", // admin_shutdown, crash_shutdown, cannot_connect_now
		"25006", // read_only_sql_transaction
		"53300", // too_many_connections
		"40001", // serialization_failure
		"40P01": // deadlock_detected
		return true
	}
	return strings.HasPrefix(code, "08") // connection_exception
}

// committingTx is the transaction withTx hands its function: a pipelined
// transaction (internal/pipetx), whose BEGIN and held-back writes (later)
// share their round trips with other statements, and what is to happen
// once it has committed (afterCommit).
type committingTx struct {
	*pipetx.Tx
	onCommit []func()
}

// later returns where a write goes whose result nothing reads: in one of
// withTx's transactions, held back to go to the server with the
// transaction's next statement or its COMMIT (pipetx.Tx.Later); in any
// other, tx itself. explain turns the write's error into the one its caller
// reports, whichever call meets it.
func later(tx pgx.Tx, explain func(error) error) dbsqlc.DBTX {
	if ct, ok := tx.(*committingTx); ok {
		return ct.Later(explain)
	}
	return explainedTx{tx, explain}
}

// explainedTx runs writes at once, explaining their errors as later does.
type explainedTx struct {
	pgx.Tx
	explain func(error) error
}

func (t explainedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := t.Tx.Exec(ctx, sql, args...)
	if err != nil {
		err = t.explain(err)
	}
	return tag, err
}

// afterCommit runs fn once tx has committed when tx is one of withTx's
// (Engine.WithTx), and never when it rolls back or withTx runs it again;
// in a transaction its caller owns and commits itself, fn runs at once.
// What a transaction reports outside the database, such as metrics, goes
// through it.
func afterCommit(tx pgx.Tx, fn func()) {
	if ct, ok := tx.(*committingTx); ok {
		ct.onCommit = append(ct.onCommit, fn)
		return
	}
	fn()
}

// runTx is one attempt of withTx. atCommit says that err came from COMMIT,
// whose outcome is then unknown; on success it returns what afterCommit
// left to run.
func runTx(ctx context.Context, pool *pgxpool.Pool, fn func(pgx.Tx) error) (onCommit []func(), atCommit bool, err error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("beginning transaction: %w", err)
	}
	defer conn.Release()
	tx := &committingTx{Tx: pipetx.Begin(conn.Conn())}
	// After a commit, the rollback does nothing.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(tx); err != nil {
		return nil, false, err
	}
	if err := tx.Commit(ctx); err != nil {
		var unknown *pipetx.CommitError
		return nil, errors.As(err, &unknown), err
	}
	return tx.onCommit, false, nil
}

// txRetryDelay returns the jittered pause after failed attempt number
// attempt (1 for the first).
func txRetryDelay(attempt int) time.Duration {
	d := txRetryDelays[min(attempt, len(txRetryDelays))-1]
	return d/2 + rand.N(d)
}

// sleepCtx waits d, or until ctx ends; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
