package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/pgcluster"
)

// lockedBuffer is a bytes.Buffer safe for a process's output and a test
// reading it at once.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// devProcess is a baton dev that is serving.
type devProcess struct {
	cmd    *exec.Cmd
	done   chan error
	addr   string // where it serves
	dbURL  string // its private cluster's database, when it started one
	stderr *lockedBuffer
}

var (
	servingLine = regexp.MustCompile(`serving on http://(\S+) `)
	clusterLine = regexp.MustCompile(`^PostgreSQL is up: (\S+) `)
)

// launchDev starts baton dev and returns once it serves; the test's end
// interrupts it if the test has not.
func launchDev(t *testing.T, env []string, args ...string) *devProcess {
	t.Helper()
	cmd := command(t, env, append([]string{"dev"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	d := &devProcess{cmd: cmd, done: make(chan error, 1), stderr: &lockedBuffer{}}
	cmd.Stderr = d.stderr
	require.NoError(t, cmd.Start())
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		d.done <- cmd.Wait()
	}()
	t.Cleanup(func() { _ = d.interrupt() })
	deadline := time.After(2 * time.Minute)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				err := <-d.done
				d.done <- err
				if strings.Contains(d.stderr.String(), pgcluster.ErrNoBinaries.Error()) {
					t.Skipf("no PostgreSQL binaries for a private cluster: %s", d.stderr.String())
				}
				t.Fatalf("baton dev exited (%v) before serving: %s", err, d.stderr.String())
			}
			if m := clusterLine.FindStringSubmatch(line); m != nil {
				d.dbURL = m[1]
			}
			if m := servingLine.FindStringSubmatch(line); m != nil {
				d.addr = m[1]
			}
			if strings.HasPrefix(line, "Press Ctrl-C") {
				go func() {
					for range lines {
					}
				}()
				return d
			}
		case <-deadline:
			t.Fatalf("baton dev did not serve within 2 minutes: %s", d.stderr.String())
		}
	}
}

// interrupt sends SIGINT, as Ctrl-C does, and returns how baton dev
// exited: nil for status 0. One that has not exited after a minute is
// killed.
func (d *devProcess) interrupt() error {
	return d.stop(syscall.SIGINT)
}

// stop sends sig and returns how baton dev exited: nil for status 0. One
// that has not exited after a minute is killed.
func (d *devProcess) stop(sig syscall.Signal) error {
	_ = d.cmd.Process.Signal(sig)
	select {
	case err := <-d.done:
		d.done <- err
		return err
	case <-time.After(time.Minute):
		_ = d.cmd.Process.Kill()
		return fmt.Errorf("baton dev still running a minute after %v", sig)
	}
}

// ready reports whether the dev's /readyz answers 200.
func (d *devProcess) ready(t *testing.T) bool {
	t.Helper()
	resp, err := http.Get("http://" + d.addr + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// devDataDir returns a directory for a private cluster that the postgres OS
// user can reach (it runs the server when the tests run as root). Whatever
// server still runs there when the test ends is stopped.
func devDataDir(t *testing.T) string {
	t.Helper()
	tmp := t.TempDir()
	require.NoError(t, os.Chmod(filepath.Dir(tmp), 0o755))
	require.NoError(t, os.Chmod(tmp, 0o755))
	dir := filepath.Join(tmp, "data")
	stopServerAtEnd(t, dir)
	return dir
}

// stopServerAtEnd stops, when the test ends, whatever PostgreSQL server
// still runs in the data directory dir.
func stopServerAtEnd(t *testing.T, dir string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := os.Stat(filepath.Join(dir, "postmaster.pid")); err != nil {
			return
		}
		if c, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dir}); err == nil {
			_ = c.Stop(ctx)
		}
	})
}

// A second baton dev, on the same address or only on the same private
// cluster, and baton demo beside it, leave the running baton dev serving:
// the second fails at once with one line saying what is in use, the demo
// uses the cluster without stopping it. Ctrl-C then stops the first with
// status 0, its cluster with it.
func TestSecondDevAndDemoLeaveTheFirstServing(t *testing.T) {
	t.Parallel()
	dataDir := devDataDir(t)
	first := launchDev(t, nil, "--addr", "127.0.0.1:0", "--data-dir", dataDir)
	require.NotEmpty(t, first.dbURL)
	require.True(t, first.ready(t))

	out, err := runBounded(t, nil, "dev", "--addr", first.addr, "--data-dir", dataDir)
	requireRefused(t, out, err, "baton dev: "+first.addr+" is in use (is another `make run` or `baton dev` running?")

	out, err = runBounded(t, nil, "dev", "--addr", "127.0.0.1:0", "--data-dir", dataDir)
	requireRefused(t, out, err, "baton dev: the private PostgreSQL cluster in "+dataDir+" is in use by another process")

	out, err = runBounded(t, nil, "demo", "--data-dir", dataDir)
	require.NoError(t, err, "%s", out)
	require.Contains(t, out, "What Maria saw")

	require.True(t, first.ready(t), "the first baton dev is still ready")
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, first.dbURL)
	require.NoError(t, err, "the first baton dev's database answers")
	var executions int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM agent_execution").Scan(&executions))
	require.NoError(t, conn.Close(ctx))

	require.NoError(t, first.interrupt(), "Ctrl-C stops baton dev with status 0")
	_, err = pgx.Connect(ctx, first.dbURL)
	require.Error(t, err, "baton dev stops the cluster it started")
}

// serverPID returns the pid of the PostgreSQL server running in dataDir,
// from the first line of its postmaster.pid.
func serverPID(t *testing.T, dataDir string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	require.NoError(t, err)
	first, _, _ := strings.Cut(string(data), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	require.NoError(t, err)
	return pid
}

// requireGone waits until the process pid has exited: it no longer
// exists, or is a zombie nobody has reaped yet. A server asked to stop
// exits within seconds; a minute is the bound.
func requireGone(t *testing.T, pid int, msg string) {
	t.Helper()
	gone := func() bool {
		if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			return true
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return errors.Is(err, os.ErrNotExist)
		}
		// The state follows the command, which is in parentheses.
		_, rest, _ := strings.Cut(string(stat), ") ")
		return strings.HasPrefix(rest, "Z")
	}
	require.Eventually(t, gone, time.Minute, 20*time.Millisecond, msg)
}

// Ctrl-C (SIGINT), a kill (SIGTERM) and a closed terminal (SIGHUP) each stop
// baton dev with status 0, and with it the PostgreSQL server it started,
// and remove the private cluster's directory and its data, as the README
// says.
func TestDevRemovesItsClusterWhenStopped(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			dataDir := devDataDir(t)
			dev := launchDev(t, nil, "--addr", "127.0.0.1:0", "--data-dir", dataDir)
			require.Contains(t, dev.dbURL, "/baton")
			server := serverPID(t, dataDir)

			require.NoError(t, dev.stop(sig), "baton dev exits with status 0 on %v: %s", sig, dev.stderr.String())
			require.NoDirExists(t, dataDir, "baton dev removes its private cluster")
			requireGone(t, server, "baton dev stops the PostgreSQL server it started")
		})
	}
}

// A baton dev killed outright (SIGKILL) cannot clean up: its server goes on
// running and its directory stays. The next baton dev on that directory
// stops that server, discards the old cluster and starts from an empty one,
// which it removes in turn on Ctrl-C.
func TestDevStartsCleanAfterAKill(t *testing.T) {
	t.Parallel()
	dataDir := devDataDir(t)
	first := launchDev(t, nil, "--addr", "127.0.0.1:0", "--data-dir", dataDir)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, first.dbURL)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE TABLE left_behind (v text)")
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
	oldServer := serverPID(t, dataDir)
	require.NoError(t, first.cmd.Process.Kill())
	require.Error(t, <-first.done, "killed")
	first.done <- nil // its cleanup has nothing left to wait for

	second := launchDev(t, nil, "--addr", "127.0.0.1:0", "--data-dir", dataDir)
	requireGone(t, oldServer, "the killed baton dev's server is stopped")
	conn, err = pgx.Connect(ctx, second.dbURL)
	require.NoError(t, err)
	var tables int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 'left_behind'").Scan(&tables))
	require.NoError(t, conn.Close(ctx))
	require.Zero(t, tables, "the second baton dev starts from an empty cluster")

	require.NoError(t, second.interrupt())
	require.NoDirExists(t, dataDir)
}

// A --data-dir holding files baton dev did not make is neither used nor
// deleted: baton dev stops at once, saying so.
func TestDevRefusesADirectoryItDidNotMake(t *testing.T) {
	t.Parallel()
	dataDir := devDataDir(t)
	require.NoError(t, os.MkdirAll(dataDir, 0o755))
	precious := filepath.Join(dataDir, "PG_VERSION")
	require.NoError(t, os.WriteFile(precious, []byte("15\n"), 0o644))
	out, err := runBounded(t, nil, "dev", "--addr", "127.0.0.1:0", "--data-dir", dataDir)
	if strings.Contains(out, pgcluster.ErrNoBinaries.Error()) {
		t.Skipf("no PostgreSQL binaries for a private cluster: %s", out)
	}
	requireRefused(t, out, err, "baton dev: "+dataDir+" holds files baton dev did not make", "--data-dir")
	require.FileExists(t, precious)
}
