package pgtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/batonrun/baton/internal/pgcluster"
	"github.com/jackc/pgx/v5"
)

// server is the PostgreSQL server the tests use.
type server struct {
	url    string
	source string       // for messages: where url came from
	close  func() error // safe to call more than once
}

// pickServer returns the server at TEST_DATABASE_URL, else the one at
// LocalURL if it answers, else a private cluster.
func pickServer(ctx context.Context, logger *slog.Logger) (*server, error) {
	noop := func() error { return nil }
	if u := os.Getenv(EnvDatabaseURL); u != "" {
		logger.InfoContext(ctx, "using "+EnvDatabaseURL)
		return &server{url: u, source: EnvDatabaseURL, close: noop}, nil
	}
	why := EnvDatabaseURL + " is unset and " + EnvNoLocal + " is set"
	if noLocal, _ := strconv.ParseBool(os.Getenv(EnvNoLocal)); !noLocal {
		why = EnvDatabaseURL + " is unset and nothing answers at 127.0.0.1:5432"
		probeCtx, cancel := context.WithTimeout(ctx, localProbeTimeout)
		err := ping(probeCtx, LocalURL)
		cancel()
		if err == nil {
			logger.InfoContext(ctx, "using local server", "url", LocalURL)
			return &server{url: LocalURL, source: "the server at 127.0.0.1:5432", close: noop}, nil
		}
		logger.InfoContext(ctx, "no local server, starting a private cluster", "error", err)
	}
	return startPrivate(ctx, logger, why)
}

// startPrivate starts a private cluster in a new directory under
// os.TempDir(); closing the server stops the cluster and removes the
// directory, as does an interrupt. why says, for error messages, why no other
// server is used.
func startPrivate(ctx context.Context, logger *slog.Logger, why string) (*server, error) {
	reapOrphans(ctx, logger)

	tmp, err := os.MkdirTemp(os.TempDir(), tempDirPattern)
	if err != nil {
		return nil, fmt.Errorf("creating directory for a private cluster: %w", err)
	}
	// The postgres OS user, which runs the cluster when we are root, must be
	// able to reach the data directory.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, errors.Join(fmt.Errorf("opening up private cluster directory: %w", err), os.RemoveAll(tmp))
	}
	if err := os.WriteFile(filepath.Join(tmp, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, errors.Join(fmt.Errorf("recording private cluster owner: %w", err), os.RemoveAll(tmp))
	}
	start := time.Now()
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{
		Dir:    filepath.Join(tmp, "data"),
		Fast:   true,
		Logger: logger,
	})
	if err != nil {
		err = errors.Join(err, os.RemoveAll(tmp))
		if errors.Is(err, pgcluster.ErrNoBinaries) {
			return nil, fmt.Errorf("no PostgreSQL server to test against: %s, and a private cluster cannot start: %w", why, err)
		}
		return nil, fmt.Errorf("starting private cluster: %w", err)
	}
	logger.InfoContext(ctx, "started private cluster", "dir", tmp, "url", cluster.URL(), "took", time.Since(start))

	var once sync.Once
	var closeErr error
	closeCluster := func() error {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
			defer cancel()
			closeErr = errors.Join(cluster.Stop(ctx), os.RemoveAll(tmp))
		})
		return closeErr
	}

	// PostgreSQL runs in a session of its own, so an interrupt that kills
	// the tests would leave it running: stop it first.
	signals := make(chan os.Signal, 1)
	done := make(chan struct{})
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case sig := <-signals:
			fmt.Fprintf(os.Stderr, "pgtest: %v: stopping private cluster\n", sig)
			if err := closeCluster(); err != nil {
				fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
			}
			os.Exit(1)
		case <-done:
		}
	}()

	return &server{
		url:    cluster.URL(),
		source: "the private cluster in " + tmp,
		close: sync.OnceValue(func() error {
			signal.Stop(signals)
			close(done)
			return closeCluster()
		}),
	}, nil
}

// reapOrphans stops and removes the private clusters whose test process is
// gone, as after a test timeout or a kill, so that they do not pile up.
// It only logs what it cannot do.
func reapOrphans(ctx context.Context, logger *slog.Logger) {
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), tempDirPattern))
	if err != nil {
		return
	}
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue // not ours, or its owner has not written the file yet
		}
		owner, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || processAlive(owner) {
			continue
		}
		dataDir := filepath.Join(dir, "data")
		if pid, ok := postmasterPID(dataDir); ok && processAlive(pid) {
			// Start reuses the running server, and Stop stops it.
			c, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dataDir, Logger: logger})
			if err == nil {
				err = c.Stop(ctx)
			}
			if err != nil {
				logger.WarnContext(ctx, "cannot stop orphaned private cluster", "dir", dir, "error", err)
				continue
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			logger.WarnContext(ctx, "cannot remove orphaned private cluster", "dir", dir, "error", err)
			continue
		}
		logger.InfoContext(ctx, "removed orphaned private cluster", "dir", dir, "owner", owner)
	}
}

// postmasterPID returns the server pid from the first line of dataDir's
// postmaster.pid.
func postmasterPID(dataDir string) (int, bool) {
	data, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0, false
	}
	first, _, _ := strings.Cut(string(data), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	return pid, err == nil && pid > 0
}

// processAlive reports whether a process with the given pid exists.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// ping connects to connString and runs one query.
func ping(ctx context.Context, connString string) error {
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, "SELECT 1")
	return err
}
