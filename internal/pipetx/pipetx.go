// Package pipetx is a PostgreSQL transaction that spends no round trip of
// its own. Its BEGIN goes to the server with its first statement, in one
// pgx batch (pgx.Batch.BeginTx), and writes whose results nothing reads
// (Tx.Later) wait for the transaction's next statement or its COMMIT and go
// with it. A transaction of three reads, two such writes and a commit costs
// three round trips instead of seven.
//
// Between those batches it is pgx's own transaction (pgx.BatchResults.Tx):
// savepoints, COPY, prepared statements and large objects behave as they
// do on any pgx.Tx.
package pipetx

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// Tx is a transaction on one connection. It is not safe for concurrent use,
// as no pgx.Tx is.
type Tx struct {
	conn *pgx.Conn
	// inner is pgx's transaction, nil until the first batch has begun it.
	inner pgx.Tx
	later []queued
	// ended is set by Commit and Rollback.
	ended bool
}

// queued is a write Later holds back.
type queued struct {
	sql     string
	args    []any
	explain func(error) error
}

// Begin returns a transaction on conn. Nothing is sent until its first
// statement, and a transaction that runs none costs no round trip.
func Begin(conn *pgx.Conn) *Tx { return &Tx{conn: conn} }

// CommitError is a failure of COMMIT itself, or of the connection while the
// commit was on its way: whether the transaction committed is unknown.
type CommitError struct{ Err error }

func (e *CommitError) Error() string { return "committing transaction: " + e.Err.Error() }
func (e *CommitError) Unwrap() error { return e.Err }

// Later returns an executor whose Exec holds a write back until the
// transaction's next statement or its COMMIT, and sends it in the same round
// trip, ahead of that statement. The write's failure, passed through explain
// (nil keeps it as it is), is what that statement or Commit returns; the
// transaction is then aborted, as after any failed statement. Only Exec may
// be called on it: Query and QueryRow read results, which nothing can wait
// for here, and return an error.
func (t *Tx) Later(explain func(error) error) Executor {
	return laterExec{t: t, explain: explain}
}

// Executor runs SQL: the shape of sqlc's DBTX.
type Executor interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

type laterExec struct {
	t       *Tx
	explain func(error) error
}

// errLaterRead is what reading through Later returns.
var errLaterRead = errors.New("pipetx: a held-back write has no result to read")

func (l laterExec) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if l.t.ended {
		return pgconn.CommandTag{}, pgx.ErrTxClosed
	}
	l.t.later = append(l.t.later, queued{sql: sql, args: args, explain: l.explain})
	return pgconn.CommandTag{}, nil
}

func (l laterExec) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return errRows{errLaterRead}, errLaterRead
}

func (l laterExec) QueryRow(context.Context, string, ...any) pgx.Row { return errRow{errLaterRead} }

// pending returns the batch of what must reach the server before the next
// statement: BEGIN when the transaction has not begun, then the held-back
// writes; nil when there is nothing.
func (t *Tx) pending() *pgx.Batch {
	if t.inner != nil && len(t.later) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	if t.inner == nil {
		b.BeginTx(pgx.TxOptions{})
	}
	for _, q := range t.later {
		b.Queue(q.sql, q.args...)
	}
	return b
}

// send sends b, which pending built and the caller may have extended, and
// reads the results of what pending put in it; the transaction is pgx's
// from here on. On failure the batch is closed, and serverSaid tells
// whether the server refused (see readPending).
func (t *Tx) send(ctx context.Context, b *pgx.Batch) (br pgx.BatchResults, serverSaid bool, err error) {
	began := t.inner == nil
	br = t.conn.SendBatch(ctx, b)
	if began {
		t.inner = br.Tx()
	}
	if serverSaid, err = t.readPending(br, began); err != nil {
		_ = br.Close()
		return nil, serverSaid, err
	}
	return br, false, nil
}

// readPending reads the results of what pending put in the batch br was
// sent with: the BEGIN, if it was there, and each held-back write, whose
// error is explained. serverSaid reports that the error, if any, is the
// server's answer (a *pgconn.PgError), which the server gives only for
// what it did not do.
func (t *Tx) readPending(br pgx.BatchResults, began bool) (serverSaid bool, err error) {
	later := t.later
	t.later = nil
	if began {
		if _, err := br.Exec(); err != nil {
			return isServerError(err), fmt.Errorf("beginning transaction: %w", err)
		}
	}
	for _, q := range later {
		if _, err := br.Exec(); err != nil {
			serverSaid = isServerError(err)
			if q.explain != nil {
				err = q.explain(err)
			}
			return serverSaid, err
		}
	}
	return false, nil
}

func isServerError(err error) bool {
	_, ok := errors.AsType[*pgconn.PgError](err)
	return ok
}

// flush sends what is pending, alone: for the calls that cannot ride in a
// batch.
func (t *Tx) flush(ctx context.Context) error {
	if t.ended {
		return pgx.ErrTxClosed
	}
	b := t.pending()
	if b == nil {
		return nil
	}
	br, _, err := t.send(ctx, b)
	if err != nil {
		return err
	}
	return br.Close()
}

// Exec runs sql after what is pending, in one round trip.
func (t *Tx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.ended {
		return pgconn.CommandTag{}, pgx.ErrTxClosed
	}
	b := t.pending()
	if b == nil {
		return t.inner.Exec(ctx, sql, args...)
	}
	b.Queue(sql, args...)
	br, _, err := t.send(ctx, b)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil && cerr != nil {
		return pgconn.CommandTag{}, cerr
	}
	return tag, err
}

// Query runs sql after what is pending, in one round trip. The rows must be
// closed, as any pgx.Rows, before the transaction is used again.
func (t *Tx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.ended {
		return errRows{pgx.ErrTxClosed}, pgx.ErrTxClosed
	}
	b := t.pending()
	if b == nil {
		return t.inner.Query(ctx, sql, args...)
	}
	b.Queue(sql, args...)
	br, _, err := t.send(ctx, b)
	if err != nil {
		return errRows{err}, err
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return errRows{err}, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// QueryRow runs sql after what is pending, in one round trip.
func (t *Tx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := t.Query(ctx, sql, args...)
	if err != nil {
		return errRow{err}
	}
	return row{rows}
}

// SendBatch sends what is pending and then b, in one round trip; the
// results returned are b's.
func (t *Tx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.ended {
		return pgx.FailedBatchResults(b, pgx.ErrTxClosed)
	}
	p := t.pending()
	if p == nil {
		return t.inner.SendBatch(ctx, b)
	}
	p.QueuedQueries = append(p.QueuedQueries, b.QueuedQueries...)
	br, _, err := t.send(ctx, p)
	if err != nil {
		return pgx.FailedBatchResults(b, err)
	}
	return br
}

// Commit sends what is pending and COMMIT in one round trip. A transaction
// that sent nothing commits nothing and costs none. The failure of a
// held-back write comes back explained, and the transaction is then known
// not to have committed; a failure of the COMMIT itself, or of the
// connection once it was sent, is a *CommitError.
func (t *Tx) Commit(ctx context.Context) error {
	if t.ended {
		return pgx.ErrTxClosed
	}
	if t.inner == nil && len(t.later) == 0 {
		t.ended = true
		return nil
	}
	if len(t.later) == 0 {
		t.ended = true
		if err := t.inner.Commit(ctx); err != nil {
			return &CommitError{Err: err}
		}
		return nil
	}
	b := t.pending()
	b.Queue("commit")
	br, serverSaid, err := t.send(ctx, b)
	if err != nil {
		if !serverSaid {
			// The COMMIT may have been carried out before the connection failed.
			err = &CommitError{Err: err}
		}
		return err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return &CommitError{Err: err}
	}
	t.ended = true
	if tag.String() == "ROLLBACK" {
		return &CommitError{Err: pgx.ErrTxCommitRollback}
	}
	return nil
}

// Rollback drops what is pending and rolls back what reached the server. As
// on a pgx.Tx, it is safe to defer after Commit, and returns
// pgx.ErrTxClosed then (a commit sent in Commit's batch is not one pgx's
// transaction saw, so it is not asked).
func (t *Tx) Rollback(ctx context.Context) error {
	t.later = nil
	if t.ended {
		return pgx.ErrTxClosed
	}
	t.ended = true
	if t.inner == nil {
		return nil
	}
	return t.inner.Rollback(ctx)
}

// Begin starts a savepoint, after sending what is pending.
func (t *Tx) Begin(ctx context.Context) (pgx.Tx, error) {
	if err := t.flush(ctx); err != nil {
		return nil, err
	}
	return t.inner.Begin(ctx)
}

// CopyFrom copies rows in, after sending what is pending.
func (t *Tx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.flush(ctx); err != nil {
		return 0, err
	}
	return t.inner.CopyFrom(ctx, table, columns, src)
}

// Prepare prepares a statement, after sending what is pending.
func (t *Tx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if err := t.flush(ctx); err != nil {
		return nil, err
	}
	return t.inner.Prepare(ctx, name, sql)
}

// LargeObjects returns pgx's large objects of the transaction, which it
// first sends what is pending for (in the background context: the call has
// none). When that fails, the large objects' calls fail with
// pgx.ErrTxClosed.
func (t *Tx) LargeObjects() pgx.LargeObjects {
	if err := t.flush(context.Background()); err != nil || t.inner == nil {
		b := &pgx.Batch{}
		b.BeginTx(pgx.TxOptions{})
		return pgx.FailedBatchResults(b, pgx.ErrTxClosed).Tx().LargeObjects()
	}
	return t.inner.LargeObjects()
}

// Conn returns the transaction's connection.
func (t *Tx) Conn() *pgx.Conn { return t.conn }

// batchRows are the rows of the last query of a batch: closing them closes
// the batch.
type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed bool
	err    error
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.Rows.Close()
	r.err = r.br.Close()
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// row is QueryRow's result over batch rows, read as pgx reads one.
type row struct{ rows pgx.Rows }

func (r row) Scan(dest ...any) error {
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// errRow and errRows report err from every call.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

type errRows struct{ err error }

func (errRows) Close()                                       {}
func (r errRows) Err() error                                 { return r.err }
func (errRows) CommandTag() pgconn.CommandTag                { return pgconn.CommandTag{} }
func (errRows) FieldDescriptions() []pgconn.FieldDescription { return nil }
func (errRows) Next() bool                                   { return false }
func (r errRows) Scan(...any) error                          { return r.err }
func (r errRows) Values() ([]any, error)                     { return nil, r.err }
func (errRows) RawValues() [][]byte                          { return nil }
func (errRows) Conn() *pgx.Conn                              { return nil }
func (errRows) TypeMap() *pgtype.Map                         { return nil }
