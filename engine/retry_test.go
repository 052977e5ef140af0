package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/pgtest"
)

// retryBundle is a database with a table of two counters, rows 1 and 2.
type retryBundle struct {
	pool   *pgxpool.Pool
	logger *slog.Logger
}

func setupRetry(t *testing.T) *retryBundle {
	t.Helper()
	pool := pgtest.NewPool(t)
	_, err := pool.Exec(context.Background(), `CREATE TABLE retry_counter (id int PRIMARY KEY, n int NOT NULL);
		INSERT INTO retry_counter VALUES (1, 0), (2, 0)`)
	require.NoError(t, err)
	return &retryBundle{pool: pool, logger: slog.New(slog.DiscardHandler)}
}

// counter returns row id's count, as committed.
func (b *retryBundle) counter(t *testing.T, id int) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), "SELECT n FROM retry_counter WHERE id = $1", id).Scan(&n))
	return n
}

// terminate ends the backend pid with pg_terminate_backend and waits until
// it has exited.
func (b *retryBundle) terminate(t *testing.T, pid uint32) {
	t.Helper()
	var done bool
	require.NoError(t, b.pool.QueryRow(context.Background(), "SELECT pg_terminate_backend($1, 5000)", int(pid)).Scan(&done))
	require.True(t, done, "backend %d did not exit", pid)
}

// backendPID returns the pid of the backend serving tx.
func backendPID(tx pgx.Tx) uint32 { return tx.Conn().PgConn().PID() }

func TestIsUnavailable(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"context canceled", fmt.Errorf("querying: %w", context.Canceled), false},
		{"deadline exceeded", fmt.Errorf("querying: %w", context.DeadlineExceeded), false},
		{"no rows", pgx.ErrNoRows, false},
		{"not found", ErrNotFound, false},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"invalid password", &pgconn.PgError{Code: "28P01"}, false},
		{"database does not exist", &pgconn.PgError{Code: "3D000"}, false},
		{"an HTTP call refused", &url.Error{Op: "Post", URL: "http://x", Err: syscall.ECONNREFUSED}, false},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"crash shutdown", fmt.Errorf("x: %w", &pgconn.PgError{Code: "57P02"}), true},
		{"starting up", &pgconn.PgError{Code: "57P03"}, true},
		{"read-only", &pgconn.PgError{Code: "25006"}, true},
		{"too many connections", &pgconn.PgError{Code: "53300"}, true},
		{"serialization failure", &pgconn.PgError{Code: "40001"}, true},
		{"deadlock", &pgconn.PgError{Code: "40P01"}, true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"unexpected EOF", fmt.Errorf("reading: %w", io.ErrUnexpectedEOF), true},
		{"conn closed", fmt.Errorf("x: %w", pgconn.ErrConnClosed), true},
		{"connection reset", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, true},
	} {
		require.Equal(t, tc.want, IsUnavailable(tc.err), "%s: %v", tc.name, tc.err)
	}

	// Real errors.
	ctx := context.Background()
	b := setupRetry(t)

	t.Run("serialization failure", func(t *testing.T) {
		t.Parallel()
		tx, err := b.pool.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(ctx)
		_, err = tx.Exec(ctx, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
		require.NoError(t, err)
		_, err = tx.Exec(ctx, "SELECT n FROM retry_counter WHERE id = 1")
		require.NoError(t, err)
		_, err = b.pool.Exec(ctx, "UPDATE retry_counter SET n = n WHERE id = 1")
		require.NoError(t, err)
		_, err = tx.Exec(ctx, "UPDATE retry_counter SET n = n WHERE id = 1")
		requireState(t, err, "40001")
		require.True(t, IsUnavailable(err), "%v", err)
	})

	t.Run("read-only transaction", func(t *testing.T) {
		t.Parallel()
		tx, err := b.pool.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(ctx)
		_, err = tx.Exec(ctx, "SET TRANSACTION READ ONLY")
		require.NoError(t, err)
		_, err = tx.Exec(ctx, "UPDATE retry_counter SET n = n WHERE id = 2")
		requireState(t, err, "25006")
		require.True(t, IsUnavailable(err), "%v", err)
	})

	t.Run("terminated connection", func(t *testing.T) {
		t.Parallel()
		conn, err := b.pool.Acquire(ctx)
		require.NoError(t, err)
		defer conn.Release()
		b.terminate(t, conn.Conn().PgConn().PID())
		_, err = conn.Exec(ctx, "SELECT 1")
		requireState(t, err, "57P01")
		require.True(t, IsUnavailable(err), "%v", err)
		// The connection is gone: what comes next is a closed connection.
		_, err = conn.Exec(ctx, "SELECT 1")
		require.ErrorIs(t, err, pgconn.ErrConnClosed)
		require.True(t, IsUnavailable(err), "%v", err)
	})

	t.Run("refused connection", func(t *testing.T) {
		t.Parallel()
		_, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=5", closedPort(t)))
		var connectErr *pgconn.ConnectError
		require.ErrorAs(t, err, &connectErr)
		require.True(t, IsUnavailable(err), "%v", err)
	})

	t.Run("cancelled query", func(t *testing.T) {
		t.Parallel()
		qctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		_, err := b.pool.Exec(qctx, "SELECT pg_sleep(5)")
		require.Error(t, err)
		require.False(t, IsUnavailable(err), "the caller's deadline is not an outage: %v", err)
	})
}

func requireState(t *testing.T, err error, code string) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, code, pgErr.Code, "%v", err)
}

// closedPort returns a local TCP port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	return port
}

// A transaction that meets a real serialization failure runs again and
// commits once; what it left for after the commit runs once, after it.
func TestWithTxRetriesSerializationFailure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupRetry(t)
	calls, hooks, seen := 0, 0, 0
	err := withTx(ctx, b.pool, b.logger, func(tx pgx.Tx) error {
		calls++
		afterCommit(tx, func() { hooks++; seen = b.counter(t, 1) })
		if _, err := tx.Exec(ctx, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "SELECT n FROM retry_counter WHERE id = 1"); err != nil {
			return err
		}
		if calls == 1 {
			if _, err := b.pool.Exec(ctx, "UPDATE retry_counter SET n = n + 1 WHERE id = 1"); err != nil {
				return fmt.Errorf("concurrent update: %w", err)
			}
		}
		_, err := tx.Exec(ctx, "UPDATE retry_counter SET n = n + 1 WHERE id = 1")
		return err
	})
	require.NoError(t, err)
	require.Equal(t, 2, calls)
	require.Equal(t, 1, hooks, "only the committed attempt's afterCommit runs")
	require.Equal(t, 2, seen, "afterCommit runs once the transaction has committed")
	require.Equal(t, 2, b.counter(t, 1))
}

// A transaction chosen as a real deadlock's victim runs again and commits.
func TestWithTxRetriesDeadlock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupRetry(t)
	calls := 0
	var firstErr error
	other := make(chan error, 1)
	err := withTx(ctx, b.pool, b.logger, func(tx pgx.Tx) error {
		calls++
		// This transaction, not the other, finds the deadlock.
		if _, err := tx.Exec(ctx, "SET LOCAL deadlock_timeout = '50ms'"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "UPDATE retry_counter SET n = n + 1 WHERE id = 1"); err != nil {
			return err
		}
		if calls == 1 {
			// Another transaction takes row 2, then waits for row 1.
			otx, err := b.pool.Begin(ctx)
			if err != nil {
				return err
			}
			pid := backendPID(otx)
			go func() {
				other <- func() error {
					defer otx.Rollback(context.Background())
					for _, sql := range []string{
						"SET LOCAL deadlock_timeout = '10s'",
						"UPDATE retry_counter SET n = n + 1 WHERE id = 2",
						"UPDATE retry_counter SET n = n + 1 WHERE id = 1",
					} {
						if _, err := otx.Exec(ctx, sql); err != nil {
							return err
						}
					}
					return otx.Commit(ctx)
				}()
			}()
			if err := waitForLock(ctx, b.pool, pid); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, "UPDATE retry_counter SET n = n + 1 WHERE id = 2")
		if calls == 1 {
			firstErr = err
		}
		return err
	})
	require.NoError(t, err)
	require.NoError(t, <-other)
	requireState(t, firstErr, "40P01")
	require.Equal(t, 2, calls)
	require.Equal(t, 2, b.counter(t, 1))
	require.Equal(t, 2, b.counter(t, 2))
}

// waitForLock returns once backend pid waits for a lock.
func waitForLock(ctx context.Context, pool *pgxpool.Pool, pid uint32) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		var waiting bool
		err := pool.QueryRow(ctx, "SELECT coalesce(wait_event_type = 'Lock', false) FROM pg_stat_activity WHERE pid = $1", int(pid)).Scan(&waiting)
		if err != nil {
			return fmt.Errorf("watching backend %d: %w", pid, err)
		}
		if waiting {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A transaction whose connection is lost before its COMMIT runs again on
// another connection.
func TestWithTxRetriesLostConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupRetry(t)
	calls := 0
	err := withTx(ctx, b.pool, b.logger, func(tx pgx.Tx) error {
		calls++
		if _, err := tx.Exec(ctx, "UPDATE retry_counter SET n = n + 1 WHERE id = 1"); err != nil {
			return err
		}
		if calls == 1 {
			b.terminate(t, backendPID(tx))
		}
		_, err := tx.Exec(ctx, "UPDATE retry_counter SET n = n + 1 WHERE id = 2")
		return err
	})
	require.NoError(t, err)
	require.Equal(t, 2, calls)
	require.Equal(t, 1, b.counter(t, 1))
	require.Equal(t, 1, b.counter(t, 2))
}

// A transaction whose COMMIT fails is not run again: it may have
// committed. The error is still an outage.
func TestWithTxDoesNotRetryCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupRetry(t)
	calls, hooks := 0, 0
	err := withTx(ctx, b.pool, b.logger, func(tx pgx.Tx) error {
		calls++
		afterCommit(tx, func() { hooks++ })
		if _, err := tx.Exec(ctx, "UPDATE retry_counter SET n = n + 1 WHERE id = 1"); err != nil {
			return err
		}
		b.terminate(t, backendPID(tx))
		return nil
	})
	require.ErrorContains(t, err, "committing transaction")
	require.True(t, IsUnavailable(err), "%v", err)
	require.Equal(t, 1, calls)
	require.Zero(t, hooks)
	require.Equal(t, 0, b.counter(t, 1))
}

// Retries are bounded, stop when the context ends, and are only for
// outages.
func TestWithTxRetryBounds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupRetry(t)
	serialization := &pgconn.PgError{Code: "40001", Message: "could not serialize access"}

	calls := 0
	err := withTx(ctx, b.pool, b.logger, func(pgx.Tx) error { calls++; return serialization })
	require.ErrorIs(t, err, serialization)
	require.Equal(t, txAttempts, calls)

	calls = 0
	unique := &pgconn.PgError{Code: "23505"}
	err = withTx(ctx, b.pool, b.logger, func(pgx.Tx) error { calls++; return unique })
	require.ErrorIs(t, err, unique)
	require.Equal(t, 1, calls)

	calls = 0
	cctx, cancel := context.WithCancel(ctx)
	err = withTx(cctx, b.pool, b.logger, func(pgx.Tx) error { calls++; cancel(); return serialization })
	require.ErrorIs(t, err, serialization)
	require.Equal(t, 1, calls, "no attempt after the context ended")

	// BEGIN failing to connect is retried too, each time on a new
	// connection attempt.
	cfg, err := pgxpool.ParseConfig(fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=5", closedPort(t)))
	require.NoError(t, err)
	var dials int
	cfg.BeforeConnect = func(context.Context, *pgx.ConnConfig) error { dials++; return nil }
	down, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer down.Close()
	calls = 0
	err = withTx(ctx, down, b.logger, func(pgx.Tx) error { calls++; return nil })
	require.ErrorContains(t, err, "beginning transaction")
	require.True(t, IsUnavailable(err), "%v", err)
	require.Zero(t, calls)
	require.Equal(t, txAttempts, dials)
}

// afterCommit in a transaction its caller owns runs at once.
func TestAfterCommitOutsideWithTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupRetry(t)
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	ran := false
	afterCommit(tx, func() { ran = true })
	require.True(t, ran)
}

func TestTxRetryDelay(t *testing.T) {
	t.Parallel()
	for attempt := 1; attempt < txAttempts; attempt++ {
		base := txRetryDelays[attempt-1]
		for range 100 {
			d := txRetryDelay(attempt)
			require.GreaterOrEqual(t, d, base/2)
			require.Less(t, d, base*3/2)
		}
	}
}
