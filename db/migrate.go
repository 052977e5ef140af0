package db

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrateLockKey is the advisory lock key held around both River's and
// Baton's migrations so that processes migrating at once take turns.
const migrateLockKey int64 = 0x626174_6f6e // "baton"

// Migrations returns Baton's goose migrations.
func Migrations() fs.FS {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic(err) // the embedded folder is fixed at build time
	}
	return sub
}

// Migrate brings River's schema and Baton's schema to their latest versions.
// It holds one session advisory lock around both, so any number of processes
// may call it at once; running it again changes nothing.
func Migrate(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquiring migration connection: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrateLockKey); err != nil {
		return fmt.Errorf("taking migration lock: %w", err)
	}
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrateLockKey)
	}()

	migrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: logger})
	if err != nil {
		return fmt.Errorf("creating River migrator: %w", err)
	}
	res, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	if err != nil {
		return fmt.Errorf("migrating River: %w", err)
	}
	for _, v := range res.Versions {
		logger.InfoContext(ctx, "applied River migration", "version", v.Version)
	}

	sqlDB := stdlib.OpenDBFromPool(pool)
	defer sqlDB.Close()
	provider, err := newProvider(sqlDB)
	if err != nil {
		return err
	}
	results, err := provider.Up(ctx)
	if err != nil {
		return fmt.Errorf("migrating Baton: %w", err)
	}
	for _, r := range results {
		logger.InfoContext(ctx, "applied Baton migration", "version", r.Source.Version, "file", r.Source.Path)
	}
	return nil
}

// ErrNotMigrated says the database lacks some of Baton's or River's migrations.
var ErrNotMigrated = errors.New("database is not migrated")

// CheckMigrated returns nil when every Baton and River migration has been
// applied, ErrNotMigrated when some are missing, or the error that prevented
// the check.
func CheckMigrated(ctx context.Context, pool *pgxpool.Pool) error {
	sqlDB := stdlib.OpenDBFromPool(pool)
	defer sqlDB.Close()
	provider, err := newProvider(sqlDB)
	if err != nil {
		return err
	}
	pending, err := provider.HasPending(ctx)
	if err != nil {
		return fmt.Errorf("checking Baton migrations: %w", err)
	}
	if pending {
		return ErrNotMigrated
	}
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return fmt.Errorf("creating River migrator: %w", err)
	}
	existing, err := migrator.ExistingVersions(ctx)
	if err != nil {
		return fmt.Errorf("checking River migrations: %w", err)
	}
	if len(existing) < len(migrator.AllVersions()) {
		return ErrNotMigrated
	}
	return nil
}

func newProvider(sqlDB *sql.DB) (*goose.Provider, error) {
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, Migrations(),
		goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return nil, fmt.Errorf("creating goose provider: %w", err)
	}
	return provider, nil
}
