package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonrun/baton/db"
)

// pingTimeout bounds the first contact with the database, so that a server
// that drops packets is reported rather than waited for.
const pingTimeout = 15 * time.Second

// connectPool opens a pool and checks that the database answers, so that an
// unreachable server is reported as such, with its address, rather than as
// whatever the first query that needed it failed with.
func connectPool(ctx context.Context, cfg *pgxpool.Config) (*pgxpool.Pool, error) {
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to the database: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, unreachable(cfg.ConnConfig.Config, err)
	}
	return pool, nil
}

// connectPoolURL is connectPool for a connection string.
func connectPoolURL(ctx context.Context, databaseURL string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parsing DATABASE_URL: %w", err)
	}
	return connectPool(ctx, cfg)
}

// unreachable explains a failed first contact with the database at cc,
// naming its address but never its password.
func unreachable(cc pgconn.Config, err error) error {
	return fmt.Errorf("cannot reach the database at %s (DATABASE_URL): %w; check that PostgreSQL is running and accepts connections there, and that DATABASE_URL names its host, port, user and database (baton dev starts a private PostgreSQL when DATABASE_URL is unset)",
		serverAddress(cc), err)
}

// serverAddress is user@host:port/database, without the password.
func serverAddress(cc pgconn.Config) string {
	host := cc.Host
	if len(host) > 0 && host[0] == '/' {
		host = "unix:" + host
	}
	return fmt.Sprintf("%s@%s/%s", cc.User, net.JoinHostPort(host, strconv.Itoa(int(cc.Port))), cc.Database)
}

// checkMigrated reports a database that misses migrations, with what to do
// about it.
func checkMigrated(ctx context.Context, pool *pgxpool.Pool) error {
	err := db.CheckMigrated(ctx, pool)
	if errors.Is(err, db.ErrNotMigrated) {
		return fmt.Errorf("%w: run \"baton migrate\" first", err)
	}
	return err
}

// listen binds addr; a port already taken is reported in one line, with
// hint saying what to do about it.
func listen(addr, hint string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("%s is in use (%s)", addr, hint)
	}
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	return ln, nil
}
