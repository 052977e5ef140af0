package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/pgtest"
)

// runBounded runs baton and returns its output (stdout and stderr) and
// error; a command still running after a minute (one that should have
// refused to start but serves) is killed, and its error says so.
func runBounded(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := command(t, env, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		<-done
		return out.String(), errors.New("still running after a minute")
	}
}

// requireRefused checks that baton exited with status 1 and printed one
// line holding each of want.
func requireRefused(t *testing.T, out string, err error, want ...string) {
	t.Helper()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	require.Equal(t, 1, exit.ExitCode(), "%s", out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 1, "one line, the error:\n%s", out)
	for _, w := range want {
		require.Contains(t, lines[0], w)
	}
}

// A value the command cannot use, as a flag or in the environment variable
// behind it, stops the command before it starts anything, naming the flag or
// variable and what it accepts; so does a word that is not a flag, which
// used to end the flags silently.
func TestBadFlagsAndEnvironmentRefuseToStart(t *testing.T) {
	t.Parallel()
	db := []string{"DATABASE_URL=" + pgtest.NewDatabase(t)}
	with := func(env ...string) []string { return append(append([]string(nil), db...), env...) }
	serve := []string{"serve", "--insecure-no-auth", "--addr", "127.0.0.1:0"}
	dev := []string{"dev", "--addr", "127.0.0.1:0"}
	cases := []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"lock timeout env", with("BATON_LOCK_TIMEOUT=banana"), serve,
			[]string{"baton serve: ", `BATON_LOCK_TIMEOUT="banana"`, "a duration such as"}},
		{"lock timeout env in dev", with("BATON_LOCK_TIMEOUT=10"), dev,
			[]string{"baton dev: ", `BATON_LOCK_TIMEOUT="10"`, "a duration such as"}},
		{"negative lock timeout", db, append(serve, "--lock-timeout", "-5m"),
			[]string{"-lock-timeout", "must be a positive duration"}},
		{"log level flag", db, append(serve, "--log-level", "loud"),
			[]string{"-log-level", "must be one of debug, info, warn, error"}},
		{"log level env", with("BATON_LOG_LEVEL=verbose"), dev,
			[]string{`BATON_LOG_LEVEL="verbose"`, "must be one of debug, info, warn, error"}},
		{"log format flag", db, append(dev, "--log-format", "xml"),
			[]string{"-log-format", "must be one of json, text"}},
		{"log format env", with("BATON_LOG_FORMAT=logfmt"), serve,
			[]string{`BATON_LOG_FORMAT="logfmt"`, "must be one of json, text"}},
		{"rescue after", db, append(serve, "--rescue-after", "30s"),
			[]string{"--rescue-after 30s", "must be over the step timeout"}},
		{"stray word", db, append(dev, "json", "--log-format", "json"),
			[]string{"baton dev: ", `unexpected argument "json"`}},
		{"stray word in serve", db, append(serve, "now"),
			[]string{"baton serve: ", `unexpected argument "now"`}},
		{"token ttl", with("BATON_JWT_SECRET=" + strings.Repeat("s", 32)), []string{"token", "--tenant", "acme", "--ttl", "-1h"},
			[]string{"baton token: ", "--ttl -1h0m0s: must be positive"}},
		{"token scope", with("BATON_JWT_SECRET=" + strings.Repeat("s", 32)), []string{"token", "--tenant", "acme", "--scope", "workflow:read"},
			[]string{`unknown scope "workflow:read"`, "workflows:read"}},
		{"monitor watch", db, []string{"monitor", "--json", "--watch", "soon"},
			[]string{"baton monitor: ", "-watch", "positive interval"}},
		{"monitor stray word", db, []string{"monitor", "--watch", "1s", "--json", "tables"},
			[]string{`unexpected argument "tables"`}},
		{"bench workers", db, []string{"bench", "--workers", "-4"},
			[]string{"--workers", "must not be negative"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			out, err := runBounded(t, c.env, c.args...)
			requireRefused(t, out, err, c.want...)
		})
	}
}

// An explicit --log-format json wins over baton dev's text default.
func TestDevLogFormatFlagWins(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		json bool
	}{
		{[]string{"--log-format", "json"}, true},
		{[]string{"--log-format=JSON"}, true},
		{nil, false},
	} {
		dev := launchDev(t, []string{"DATABASE_URL=" + cappedPool(t, emptyDatabase(t))}, append([]string{"--addr", "127.0.0.1:0"}, c.args...)...)
		require.NoError(t, dev.interrupt(), "baton dev exits 0 on SIGINT")
		line, _, _ := strings.Cut(dev.stderr.String(), "\n")
		require.NotEmpty(t, line)
		require.Equal(t, c.json, json.Valid([]byte(line)), "baton dev %v logged %q", c.args, line)
	}
}

// The monitor reads its flags in any order: --watch with an interval
// before --json as well as after it.
func TestMonitorFlagsInAnyOrder(t *testing.T) {
	t.Parallel()
	url, _ := monitorDatabase(t)
	for _, args := range [][]string{
		{"--watch", "50ms", "--json"},
		{"--json", "--watch", "50ms"},
		{"--watch", "50ms", "--tenant", "acme", "--json", "--limit", "5"},
		{"--watch=50ms", "--json"},
	} {
		cmd := command(t, []string{"DATABASE_URL=" + url}, append([]string{"monitor"}, args...)...)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())
		sc := bufio.NewScanner(stdout)
		frames := 0
		for frames < 2 && sc.Scan() {
			var frame monitorJSON
			require.NoError(t, json.Unmarshal(sc.Bytes(), &frame), "%v printed %q", args, sc.Text())
			require.NotEmpty(t, frame.Totals)
			frames++
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
		go func() { _, _ = io.Copy(io.Discard, stdout) }()
		require.NoError(t, cmd.Wait(), "%v: %s", args, stderr.String())
		require.Equal(t, 2, frames, "%v: two JSON frames; stderr: %s", args, stderr.String())
	}
}

// closedPort returns a TCP port on 127.0.0.1 that nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	return port
}

// A database that cannot be reached is reported as such, with its address
// and without its password, not as a database to migrate.
func TestUnreachableDatabaseIsReportedAsSuch(t *testing.T) {
	t.Parallel()
	port := closedPort(t)
	env := []string{fmt.Sprintf("DATABASE_URL=postgres://baton:s3cretpw@127.0.0.1:%d/batondb?sslmode=disable", port)}
	for _, args := range [][]string{
		{"serve", "--insecure-no-auth", "--addr", "127.0.0.1:0"},
		{"monitor"},
		{"migrate"},
	} {
		out, err := runBounded(t, env, args...)
		requireRefused(t, out, err, fmt.Sprintf("baton %s: cannot reach the database at baton@127.0.0.1:%d/batondb (DATABASE_URL)", args[0], port),
			"connection refused", "check that PostgreSQL is running")
		require.NotContains(t, out, `run "baton migrate"`)
		require.NotContains(t, out, "s3cretpw")
	}
}

// A listen address already taken stops serve before it starts River: its
// one line of output is the bind error.
func TestServeFailsFastOnABusyPort(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	addr := ln.Addr().String()
	out, err := runBounded(t, []string{"DATABASE_URL=" + pgtest.NewDatabase(t)}, "serve", "--insecure-no-auth", "--addr", addr)
	requireRefused(t, out, err, "baton serve: "+addr+" is in use (BATON_ADDR or --addr picks another address)")
}

// The tests of this package leave nothing in the temporary directory, the
// baton binary they build included: run one that builds it, as a test run
// of its own with a TMPDIR of its own.
func TestTestsLeaveNothingInTMPDIR(t *testing.T) {
	t.Parallel()
	if os.Getenv("BATON_NESTED_TEST") != "" {
		t.Skip("already the nested run")
	}
	tmp := t.TempDir()
	// Without a server to test against, the nested run starts a private
	// cluster under TMPDIR, as the postgres user when run as root: every
	// directory on the way must be searchable by it.
	require.NoError(t, os.Chmod(filepath.Dir(tmp), 0o755))
	require.NoError(t, os.Chmod(tmp, 0o755))
	cmd := exec.Command("go", "test", "-count=1", "-run", "^TestTokenNeedsSecretAndTenant$", ".")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "BATON_NESTED_TEST=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	entries, err := os.ReadDir(tmp)
	require.NoError(t, err)
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	require.Empty(t, left, "left in TMPDIR by a test run")
}
