package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	_ = d.cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-d.done:
		d.done <- err
		return err
	case <-time.After(time.Minute):
		_ = d.cmd.Process.Kill()
		return errors.New("baton dev still running a minute after SIGINT")
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
	return dir
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
