package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonrun/baton/db"
	"github.com/batonrun/baton/internal/benchkit"
)

// scratchDatabase is a migrated database of its own that a measuring
// command (bench, soak) creates on a server, and removes unless kept.
type scratchDatabase struct {
	Name string
	Pool *pgxpool.Pool
	// Close closes the pool, drops the database unless kept, and stops
	// the private cluster if the command started one; it reports what it
	// could not do through progress.
	Close func()
}

// openScratchDatabase creates a database named prefix_<time> on the server
// at serverURL (empty: a private cluster in dataDir), migrates it and opens
// a pool of maxConns connections to it.
func openScratchDatabase(ctx context.Context, prefix, serverURL, dataDir string, maxConns int, keep bool, progress func(string, ...any)) (*scratchDatabase, error) {
	if serverURL == "" {
		progress("DATABASE_URL is unset: starting a private PostgreSQL cluster in %s", dataDir)
	}
	server, err := benchkit.StartServer(ctx, serverURL, dataDir)
	if err != nil {
		return nil, err
	}
	var undo []func()
	closeAll := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	undo = append(undo, func() {
		if err := server.Stop(context.WithoutCancel(ctx)); err != nil {
			progress("%v", err)
		}
	})
	name := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano())
	dbURL, err := server.CreateDatabase(ctx, name)
	if err != nil {
		closeAll()
		return nil, err
	}
	if !keep {
		undo = append(undo, func() {
			if err := server.DropDatabase(context.WithoutCancel(ctx), name); err != nil {
				progress("%v", err)
			}
		})
	}
	pool, err := openPool(ctx, dbURL, maxConns)
	if err != nil {
		closeAll()
		return nil, err
	}
	undo = append(undo, pool.Close)
	if err := db.Migrate(ctx, pool, nil); err != nil {
		closeAll()
		return nil, err
	}
	return &scratchDatabase{Name: name, Pool: pool, Close: closeAll}, nil
}

// openPool opens a pool of maxConns connections to dbURL.
func openPool(ctx context.Context, dbURL string, maxConns int) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, fmt.Errorf("parsing the database URL: %w", err)
	}
	pcfg.MaxConns = int32(maxConns)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to the database: %w", err)
	}
	return pool, nil
}
