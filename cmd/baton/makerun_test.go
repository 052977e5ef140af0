package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/require"
)

// `make run` on a terminal, stopped with Ctrl-C as a person stops it: the
// terminal sends SIGINT to its foreground process group. make exits with
// status 0, baton dev's PostgreSQL server is stopped and its private
// cluster's directory is gone. The recipe runs the baton this package's
// tests built (make's -o build skips building bin/baton), with TMPDIR
// giving baton dev a data directory of the test's own.
func TestMakeRunStopsCleanlyOnCtrlC(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make on this machine")
	}
	makefile, err := filepath.Abs("../../Makefile")
	require.NoError(t, err)
	tmp := filepath.Dir(devDataDir(t)) // a directory the postgres OS user can reach
	dataDir := filepath.Join(tmp, "baton-dev")
	stopServerAtEnd(t, dataDir)
	require.NoError(t, os.MkdirAll(filepath.Join(tmp, "bin"), 0o755))
	require.NoError(t, os.Symlink(binary(t), filepath.Join(tmp, "bin", "baton")))

	cmd := exec.Command("make", "-f", makefile, "-o", "build", "run")
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "BATON_ADDR=127.0.0.1:0", "DATABASE_URL=", "BATON_JWT_SECRET=",
		"MAKEFLAGS=", "MAKELEVEL=") // not a sub-make of a `make test` running this test
	terminal, err := pty.Start(cmd) // make's stdin, stdout and stderr, and its session's terminal
	require.NoError(t, err)
	defer terminal.Close()
	done := make(chan error, 1)
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
		}
	})

	output := &lockedBuffer{}
	serving := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(terminal)
		for sc.Scan() {
			line := strings.TrimRight(sc.Text(), "\r")
			_, _ = output.Write([]byte(line + "\n"))
			if strings.HasPrefix(line, "Press Ctrl-C") {
				close(serving)
			}
		}
		done <- cmd.Wait()
	}()
	select {
	case <-serving:
	case err := <-done:
		done <- err
		if strings.Contains(output.String(), "PostgreSQL binaries not found") {
			t.Skipf("no PostgreSQL binaries for a private cluster: %s", output)
		}
		t.Fatalf("make run exited (%v) before serving:\n%s", err, output)
	case <-time.After(2 * time.Minute):
		t.Fatalf("make run did not serve within 2 minutes:\n%s", output)
	}
	require.Contains(t, output.String(), "a private cluster in "+dataDir)
	server := serverPID(t, dataDir)

	_, err = terminal.Write([]byte{0x03}) // Ctrl-C, as the terminal's line discipline reads it
	require.NoError(t, err)
	select {
	case err = <-done:
		done <- err
	case <-time.After(time.Minute):
		t.Fatalf("make run still running a minute after Ctrl-C:\n%s", output)
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		t.Fatalf("make run ended with %v after Ctrl-C, not status 0:\n%s", exit.ProcessState, output)
	}
	require.NoError(t, err, "%s", output)
	require.NoDirExists(t, dataDir, "baton dev removes its private cluster")
	requireGone(t, server, "baton dev stops its PostgreSQL server")
}

// stubTools returns a directory, to be the whole of PATH, holding a go,
// gofmt and git that do nothing but note how they were called in the file
// calls in it, and a chromium when withChromium: enough for make test's
// recipes to run through without building or testing anything.
func stubTools(t *testing.T, withChromium bool) (dir string, calls func() string) {
	t.Helper()
	dir = t.TempDir()
	log := filepath.Join(dir, "calls")
	names := []string{"go", "gofmt", "git"}
	if withChromium {
		names = append(names, "chromium")
	}
	for _, name := range names {
		script := "#!/bin/sh\necho \"" + name + " $*\" >> " + log + "\n"
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755))
	}
	return dir, func() string {
		data, _ := os.ReadFile(log)
		return string(data)
	}
}

// go test prints nothing of a test that skips, so make test says itself,
// before the tests, that the console's browser tests will be skipped when
// there is no Chromium to run them, and says nothing when there is one.
func TestMakeTestSaysBrowserTestsAreSkipped(t *testing.T) {
	t.Parallel()
	makePath, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make on this machine")
	}
	repo, err := filepath.Abs("../..")
	require.NoError(t, err)
	const notice = "the console's browser tests will be skipped"
	for _, withChromium := range []bool{false, true} {
		path, calls := stubTools(t, withChromium)
		cmd := exec.Command(makePath, "test")
		cmd.Dir = repo
		cmd.Env = []string{"PATH=" + path, "HOME=" + t.TempDir()} // no BATON_CHROMIUM, no BATON_REQUIRE_BROWSER
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Contains(t, calls(), "go test -race", "make test ran through to go test:\n%s", out)
		if withChromium {
			require.NotContains(t, string(out), notice)
		} else {
			require.Contains(t, string(out), notice)
		}
	}
}
