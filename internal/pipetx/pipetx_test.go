package pipetx_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/pgtest"
	"github.com/batonrun/baton/internal/pipetx"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// wire counts what a connection sends and can fail its next read, as a
// network that drops the connection would.
type wire struct {
	net.Conn
	writes   *atomic.Int64
	failRead *atomic.Bool
}

func (w wire) Write(b []byte) (int, error) {
	w.writes.Add(1)
	return w.Conn.Write(b)
}

func (w wire) Read(b []byte) (int, error) {
	if w.failRead.Load() {
		_ = w.Conn.Close()
		return 0, errors.New("the network dropped the connection")
	}
	return w.Conn.Read(b)
}

type probe struct {
	conn     *pgx.Conn
	writes   atomic.Int64
	failRead atomic.Bool
}

// connect opens a connection to a fresh database with a table t (id, v) in
// it, whose writes to the server are counted.
func connect(t *testing.T) *probe {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(pgtest.NewDatabase(t))
	require.NoError(t, err)
	p := &probe{}
	dial := cfg.DialFunc
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return wire{Conn: c, writes: &p.writes, failRead: &p.failRead}, nil
	}
	p.conn, err = pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.conn.Close(context.Background()) })
	_, err = p.conn.Exec(ctx, `CREATE TABLE t (id int PRIMARY KEY, v text NOT NULL)`)
	require.NoError(t, err)
	return p
}

// roundTrips runs fn and returns how many times the client wrote to the
// server meanwhile: each write is a round trip, as the client waits for its
// answer before it writes again.
func (p *probe) roundTrips(t *testing.T, fn func()) int64 {
	t.Helper()
	before := p.writes.Load()
	fn()
	return p.writes.Load() - before
}

func (p *probe) count(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, p.conn.QueryRow(context.Background(), `SELECT count(*) FROM t`).Scan(&n))
	return n
}

const insert = `INSERT INTO t (id, v) VALUES ($1, $2)`

// readAndWrite is a transaction of one read, two writes nothing reads and a
// commit.
func readAndWrite(t *testing.T, ctx context.Context, tx pgx.Tx, later func() pipetx.Executor, id int) {
	t.Helper()
	var n int
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM t WHERE id >= $1`, id).Scan(&n))
	w := later()
	_, err := w.Exec(ctx, insert, id, "a")
	require.NoError(t, err)
	_, err = w.Exec(ctx, insert, id+1, "b")
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
}

func TestPipelinedTransactionCostsTwoRoundTripsWherePgxCostsFive(t *testing.T) {
	ctx := context.Background()
	p := connect(t)
	// The first run of each statement prepares it: a round trip of its own.
	warm := pipetx.Begin(p.conn)
	readAndWrite(t, ctx, warm, func() pipetx.Executor { return warm.Later(nil) }, 100)

	piped := p.roundTrips(t, func() {
		tx := pipetx.Begin(p.conn)
		readAndWrite(t, ctx, tx, func() pipetx.Executor { return tx.Later(nil) }, 1)
	})
	plain := p.roundTrips(t, func() {
		tx, err := p.conn.Begin(ctx)
		require.NoError(t, err)
		readAndWrite(t, ctx, tx, func() pipetx.Executor { return tx }, 3)
	})
	require.Equal(t, int64(2), piped, "BEGIN with the read, the writes with COMMIT")
	require.Equal(t, int64(5), plain, "BEGIN, the read, two writes, COMMIT")
	require.Equal(t, 6, p.count(t), "both transactions committed both rows")

	idle := p.roundTrips(t, func() {
		tx := pipetx.Begin(p.conn)
		require.NoError(t, tx.Commit(ctx))
		require.ErrorIs(t, tx.Rollback(ctx), pgx.ErrTxClosed)
	})
	require.Zero(t, idle, "a transaction that ran nothing sent nothing")
}

func TestHeldBackWritesGoBeforeTheNextStatement(t *testing.T) {
	ctx := context.Background()
	p := connect(t)
	tx := pipetx.Begin(p.conn)
	_, err := tx.Later(nil).Exec(ctx, insert, 1, "a")
	require.NoError(t, err)

	var v string
	require.NoError(t, tx.QueryRow(ctx, `SELECT v FROM t WHERE id = 1`).Scan(&v), "the read sees the write sent ahead of it")
	require.Equal(t, "a", v)

	_, err = tx.Later(nil).Exec(ctx, insert, 2, "b")
	require.NoError(t, err)
	rows, err := tx.Query(ctx, `SELECT id FROM t ORDER BY id`)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	require.NoError(t, err)
	require.Equal(t, []int{1, 2}, ids)

	_, err = tx.Later(nil).Exec(ctx, insert, 3, "c")
	require.NoError(t, err)
	b := &pgx.Batch{}
	b.Queue(`SELECT count(*) FROM t`)
	br := tx.SendBatch(ctx, b)
	var n int
	require.NoError(t, br.QueryRow().Scan(&n))
	require.NoError(t, br.Close())
	require.Equal(t, 3, n, "a batch's results are its own, after the held-back write")

	_, err = tx.Later(nil).Exec(ctx, insert, 4, "d")
	require.NoError(t, err)
	sp, err := tx.Begin(ctx)
	require.NoError(t, err)
	_, err = sp.Exec(ctx, insert, 5, "e")
	require.NoError(t, err)
	require.NoError(t, sp.Rollback(ctx), "the savepoint undoes only what came after it")

	_, err = tx.Later(nil).Exec(ctx, `UPDATE t SET v = 'z' WHERE id = 1`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	require.Equal(t, 4, p.count(t))
	require.NoError(t, p.conn.QueryRow(ctx, `SELECT v FROM t WHERE id = 1`).Scan(&v))
	require.Equal(t, "z", v, "the write held back until COMMIT committed")

	_, err = tx.Later(nil).Exec(ctx, insert, 9, "late")
	require.ErrorIs(t, err, pgx.ErrTxClosed)
	_, err = tx.Exec(ctx, insert, 9, "late")
	require.ErrorIs(t, err, pgx.ErrTxClosed)
}

func TestRollbackDropsHeldBackWrites(t *testing.T) {
	ctx := context.Background()
	p := connect(t)

	tx := pipetx.Begin(p.conn)
	_, err := tx.Later(nil).Exec(ctx, insert, 1, "a")
	require.NoError(t, err)
	sent := p.roundTrips(t, func() { require.NoError(t, tx.Rollback(ctx)) })
	require.Zero(t, sent, "nothing had reached the server")
	require.ErrorIs(t, tx.Commit(ctx), pgx.ErrTxClosed)

	tx = pipetx.Begin(p.conn)
	_, err = tx.Exec(ctx, insert, 2, "b")
	require.NoError(t, err)
	_, err = tx.Later(nil).Exec(ctx, insert, 3, "c")
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(ctx))
	require.Zero(t, p.count(t))
	require.Equal(t, byte('I'), p.conn.PgConn().TxStatus(), "the connection is out of the transaction")
}

// duplicate is what explain turns a unique violation into.
var duplicate = errors.New("that id is taken")

func explain(err error) error {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == "23505" {
		return duplicate
	}
	return err
}

func TestAFailedHeldBackWriteIsExplainedByTheCallThatSentIt(t *testing.T) {
	ctx := context.Background()
	p := connect(t)
	_, err := p.conn.Exec(ctx, insert, 1, "taken")
	require.NoError(t, err)

	t.Run("the next statement", func(t *testing.T) {
		tx := pipetx.Begin(p.conn)
		_, err := tx.Later(explain).Exec(ctx, insert, 1, "again")
		require.NoError(t, err, "held back, not yet sent")
		var n int
		err = tx.QueryRow(ctx, `SELECT count(*) FROM t`).Scan(&n)
		require.ErrorIs(t, err, duplicate)
		_, err = tx.Exec(ctx, `SELECT 1`)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr)
		require.Equal(t, "25P02", pgErr.Code, "the transaction is aborted, as after any failed statement")
		require.NoError(t, tx.Rollback(ctx))
	})

	t.Run("commit", func(t *testing.T) {
		tx := pipetx.Begin(p.conn)
		_, err := tx.Later(nil).Exec(ctx, insert, 2, "fine")
		require.NoError(t, err)
		_, err = tx.Later(explain).Exec(ctx, insert, 1, "again")
		require.NoError(t, err)
		err = tx.Commit(ctx)
		require.ErrorIs(t, err, duplicate)
		var unknown *pipetx.CommitError
		require.False(t, errors.As(err, &unknown), "a write that failed before COMMIT leaves no doubt: nothing committed")
		require.NoError(t, tx.Rollback(ctx))
	})

	require.Equal(t, 1, p.count(t), "neither transaction wrote anything")
	require.Equal(t, byte('I'), p.conn.PgConn().TxStatus())
}

func TestAConnectionLostAtCommitLeavesTheOutcomeUnknown(t *testing.T) {
	ctx := context.Background()
	p := connect(t)
	tx := pipetx.Begin(p.conn)
	_, err := tx.Exec(ctx, insert, 1, "a")
	require.NoError(t, err)
	_, err = tx.Later(nil).Exec(ctx, insert, 2, "b")
	require.NoError(t, err)

	p.failRead.Store(true)
	err = tx.Commit(ctx)
	var unknown *pipetx.CommitError
	require.ErrorAs(t, err, &unknown, "the batch with COMMIT was sent: it may have committed")
	_ = tx.Rollback(ctx)
	require.True(t, p.conn.IsClosed())
}
