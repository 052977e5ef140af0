package pgcluster

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Ownership: the process that owns a data directory is the only one that
// stops its server, so that a second process using the same directory (a
// second `baton dev`, `baton demo` beside it) never stops the server from
// under the first. A Cluster owns its directory while it holds an exclusive
// flock on the directory itself. The kernel drops the lock when the owning
// process exits, however it exits, so a server left running by a killed
// owner is adopted, and stopped, by the next Start. The lock is taken on a
// descriptor opened close-on-exec, so the server that pg_ctl starts never
// inherits it.

// ErrInUse says that another live process, or another Cluster of this
// process, owns the data directory given to Start without Options.Share.
var ErrInUse = errors.New("PostgreSQL cluster in use by another process")

// claim makes c the owner of its data directory, or a guest when another
// owner holds it and share allows, or fails with ErrInUse.
func (c *Cluster) claim(share bool) error {
	lock, err := lockDir(c.dir)
	if err != nil {
		return err
	}
	if lock == nil && !share {
		return fmt.Errorf("%w: another process owns %s", ErrInUse, c.dir)
	}
	c.mu.Lock()
	c.lock = lock
	c.mu.Unlock()
	return nil
}

// Owner reports whether this Cluster owns its data directory: it started the
// server or found it without a live owner, and it stops it (Stop). A guest
// (Options.Share) does not, and neither does a Cluster once stopped.
func (c *Cluster) Owner() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lock != nil
}

// release gives up the ownership, if c has it.
func (c *Cluster) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.releaseLocked()
}

// releaseLocked is release with c.mu held.
func (c *Cluster) releaseLocked() {
	if c.lock != nil {
		_ = c.lock.Close() // closing the descriptor drops the flock
		c.lock = nil
	}
}

// lockDir takes an exclusive flock on the directory dir without waiting. It
// returns nil and no error when another open descriptor holds the lock.
func lockDir(dir string) (*os.File, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("opening cluster directory %s to take its ownership: %w", dir, err)
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		return f, nil
	}
	_ = f.Close()
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return nil, nil
	}
	return nil, fmt.Errorf("taking the ownership of cluster directory %s: %w", dir, err)
}
