package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// A cluster that holds nothing worth keeping, such as `baton dev`'s, is
// started with Options.Fresh and removed with Remove, so that each run
// starts empty and leaves no data directory behind. Both delete only what
// this package made: Start writes a marker file into every data directory
// it initializes (initdb, or a copy of a primary), and a directory without
// it, which may hold someone's data, is never deleted.

// markerName is the file, inside the data directory, that says this
// package initialized the cluster there. PostgreSQL ignores files it does
// not know in its data directory.
const markerName = "pgcluster.made"

// markerText is what the marker file says to a person who finds it.
const markerText = "This PostgreSQL cluster was initialized by Baton's pgcluster package; Options.Fresh and Remove may delete this directory.\n"

// ErrForeignDir says that a data directory given to Start with
// Options.Fresh, or to Remove, holds files this package did not make: a
// cluster initialized by hand or by another program, or anything else.
// Neither deletes it.
var ErrForeignDir = errors.New("the directory holds files pgcluster did not make")

// writeMarker marks the data directory as initialized by this package.
func (c *Cluster) writeMarker() error {
	if err := os.WriteFile(filepath.Join(c.dir, markerName), []byte(markerText), 0o644); err != nil {
		return fmt.Errorf("marking cluster directory %s as pgcluster's: %w", c.dir, err)
	}
	return nil
}

// checkMarker returns ErrForeignDir, wrapped with the directory's name,
// unless the data directory holds the marker file.
func (c *Cluster) checkMarker() error {
	ok, err := fileExists(filepath.Join(c.dir, markerName))
	if err != nil {
		return fmt.Errorf("looking for the marker file in %s: %w", c.dir, err)
	}
	if !ok {
		return fmt.Errorf("%w: %s has no %s file", ErrForeignDir, c.dir, markerName)
	}
	return nil
}

// discard empties the data directory, which c owns, of a cluster an earlier
// owner left there, stopping its server if it still runs. The directory
// itself stays, since c's ownership is a lock held on it. An empty
// directory is left as it is; one without the marker file is refused.
func (c *Cluster) discard(ctx context.Context) error {
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		return fmt.Errorf("reading cluster directory %s: %w", c.dir, err)
	}
	if len(entries) == 0 {
		return nil
	}
	if err := c.checkMarker(); err != nil {
		return err
	}
	if err := c.stopServer(ctx); err != nil {
		return err
	}
	if err := c.empty(); err != nil {
		return fmt.Errorf("discarding the old cluster: %w", err)
	}
	c.logger.InfoContext(ctx, "discarded a PostgreSQL cluster left by an earlier owner")
	return nil
}

// empty removes everything in the data directory but the directory itself.
func (c *Cluster) empty() error {
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		return fmt.Errorf("reading cluster directory %s: %w", c.dir, err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(c.dir, e.Name())); err != nil {
			return fmt.Errorf("emptying cluster directory %s: %w", c.dir, err)
		}
	}
	return nil
}

// Remove stops the server as Stop does, then deletes the data directory and
// everything in it, and gives up the ownership. Only the owner removes (see
// Owner): on a guest, or on a Cluster already stopped or removed, Remove
// does nothing. A data directory this package did not initialize (no
// marker file, as for a cluster found running there) is stopped but kept,
// and Remove returns ErrForeignDir.
func (c *Cluster) Remove(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lock == nil {
		return nil
	}
	defer c.releaseLocked()
	if err := c.stopServer(ctx); err != nil {
		return err
	}
	if err := c.checkMarker(); err != nil {
		return fmt.Errorf("removing PostgreSQL cluster: %w", err)
	}
	// The lock is held until the directory is gone, so that no other
	// process claims it half deleted.
	if err := os.RemoveAll(c.dir); err != nil {
		return fmt.Errorf("removing PostgreSQL cluster directory %s: %w", c.dir, err)
	}
	c.logger.InfoContext(ctx, "removed PostgreSQL cluster")
	return nil
}
