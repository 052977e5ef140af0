package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// promoteTimeout bounds Promote's wait for the promoted server to accept
// writes when ctx has no earlier deadline.
const promoteTimeout = 60 * time.Second

// serverSettings checks the replication options and returns the settings
// (name=value) the server starts with besides its port and sockets.
func serverSettings(opts Options) ([]string, error) {
	if opts.Primary != nil && opts.SynchronousStandby != "" {
		return nil, errors.New("starting PostgreSQL cluster: Options.Primary and Options.SynchronousStandby cannot both be set: a standby that waits for a standby of its own would hang every commit once promoted")
	}
	if opts.Primary == nil && opts.StandbyName != "" {
		return nil, errors.New("starting PostgreSQL cluster: Options.StandbyName needs Options.Primary")
	}
	if opts.StandbyName != "" && !isPlainName(opts.StandbyName) {
		return nil, fmt.Errorf("starting PostgreSQL cluster: Options.StandbyName %q is not made of ASCII letters, digits and underscores", opts.StandbyName)
	}
	if opts.SynchronousStandby == "" {
		return nil, nil
	}
	if !isPlainName(opts.SynchronousStandby) {
		return nil, fmt.Errorf("starting PostgreSQL cluster: Options.SynchronousStandby %q is not made of ASCII letters, digits and underscores", opts.SynchronousStandby)
	}
	// wal_level is replica and max_wal_senders 10 by default, and initdb's
	// pg_hba.conf trusts local replication connections (--auth=trust).
	return []string{"synchronous_standby_names=" + opts.SynchronousStandby}, nil
}

// isPlainName reports whether s is a non-empty run of ASCII letters, digits
// and underscores, which needs no quoting in a setting or a conninfo.
func isPlainName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') && r != '_' {
			return false
		}
	}
	return true
}

// basebackup fills the (empty) data directory with a copy of primary made
// by pg_basebackup, which streams the WAL written meanwhile (-X stream) and
// writes standby.signal and a primary_conninfo naming the standby (-R), so
// that the server started on it is a streaming standby of primary.
func (c *Cluster) basebackup(ctx context.Context, primary *Cluster, name string, fast bool) error {
	if c.bins.pgBasebackup == "" {
		return fmt.Errorf("%w: pg_basebackup is neither beside %s nor on PATH", ErrNoBinaries, c.bins.pgCtl)
	}
	if name == "" {
		name = DefaultStandbyName
	}
	start := time.Now()
	// -R copies every connection option given here but the database into
	// primary_conninfo, application_name included.
	conninfo := fmt.Sprintf("host=127.0.0.1 port=%d user=%s application_name=%s sslmode=disable", primary.port, serverUser, name)
	args := []string{
		"-D", c.dir,
		"-d", conninfo,
		"-R",
		"-X", "stream",
		"-c", "fast", // checkpoint at once rather than spread over minutes
	}
	if fast {
		args = append(args, "--no-sync")
	}
	if out, err := c.run(ctx, c.bins.pgBasebackup, args...); err != nil {
		return fmt.Errorf("copying the PostgreSQL cluster on port %d into %s: %w: %s", primary.port, c.dir, err, out)
	}
	// The copy holds the primary's server log and its socket lock files;
	// the standby starts both afresh.
	if err := os.Remove(filepath.Join(c.dir, "log")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the primary's log from %s: %w", c.dir, err)
	}
	if err := os.RemoveAll(filepath.Join(c.dir, socketDirName)); err != nil {
		return fmt.Errorf("removing the primary's socket directory from %s: %w", c.dir, err)
	}
	c.logger.InfoContext(ctx, "copied PostgreSQL cluster for a standby", "primary_port", primary.port, "standby_name", name, "took", time.Since(start))
	return nil
}

// Promote turns a standby into a primary with pg_ctl promote, and returns
// once it accepts writes: pg_is_in_recovery() is false. Promoting a server
// that is not a standby is an error. The promoted server keeps the settings
// it was started with, so it waits for no synchronous standby (see
// Options.SynchronousStandby).
func (c *Cluster) Promote(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, promoteTimeout)
	defer cancel()
	start := time.Now()
	if out, err := c.run(ctx, c.bins.pgCtl, "promote", "-D", c.dir, "-w"); err != nil {
		return fmt.Errorf("promoting the PostgreSQL standby in %s: %w: %s", c.dir, err, out)
	}
	for {
		inRecovery, err := c.inRecovery(ctx)
		if err == nil && !inRecovery {
			c.logger.InfoContext(ctx, "promoted PostgreSQL standby", "port", c.port, "took", time.Since(start))
			return nil
		}
		if err == nil {
			err = errors.New("pg_is_in_recovery() is still true")
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the promoted PostgreSQL server on port %d to accept writes: %w (last: %w)", c.port, ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// inRecovery asks the server whether it is a standby (still replaying WAL).
func (c *Cluster) inRecovery(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.URL())
	if err != nil {
		return false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var in bool
	err = conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&in)
	return in, err
}

// StopImmediate kills the server the way a crash would: pg_ctl stop -m
// immediate ends every server process at once, without a checkpoint and
// without waiting for clients, so the next start replays the WAL. It waits
// until the server has exited. Stopping a cluster that is not running does
// nothing. Only the owner may (see Owner), and it stays the owner, so that
// it can start the server again (Start with Options.Share) and stop it.
func (c *Cluster) StopImmediate(ctx context.Context) error {
	if !c.Owner() {
		return fmt.Errorf("stopping PostgreSQL cluster in %s immediately: this Cluster does not own it", c.dir)
	}
	running, err := c.running(ctx)
	if err != nil {
		return err
	}
	if !running {
		return nil
	}
	start := time.Now()
	if out, err := c.run(ctx, c.bins.pgCtl, "stop", "-D", c.dir, "-m", "immediate", "-w"); err != nil {
		return fmt.Errorf("stopping PostgreSQL cluster in %s immediately: %w: %s", c.dir, err, out)
	}
	c.logger.InfoContext(ctx, "stopped PostgreSQL cluster immediately", "port", c.port, "took", time.Since(start))
	return nil
}

// MultiHostURL returns a postgres:// URL naming every cluster's host and port
// in order, for the superuser postgres and database, over TCP without TLS,
// with target_session_attrs=read-write: a client connecting with it tries
// the hosts in turn and keeps the first that accepts writes, so that after a
// standby's promotion new connections find the new primary by themselves.
func MultiHostURL(database string, clusters ...*Cluster) string {
	hosts := make([]string, len(clusters))
	for i, c := range clusters {
		hosts[i] = "127.0.0.1:" + strconv.Itoa(c.port)
	}
	return fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable&target_session_attrs=read-write",
		serverUser, strings.Join(hosts, ","), url.PathEscape(database))
}
