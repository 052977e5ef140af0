package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
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

	"github.com/batonrun/baton/internal/pgtest"
)

// TestMain runs the tests, then removes the baton binary they built.
func TestMain(m *testing.M) {
	code := pgtest.Run(m)
	if binDir != "" {
		if err := os.RemoveAll(binDir); err != nil {
			fmt.Fprintf(os.Stderr, "removing the test binary: %v\n", err)
		}
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	binDir    string // removed by TestMain
	binPath   string
	buildErr  error
)

// binary builds the baton command once per test run, into a directory
// TestMain removes.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "baton-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binDir = dir
		binPath = filepath.Join(dir, "baton")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return binPath
}

// emptyDatabase creates a database with no schema at all and returns its URL.
func emptyDatabase(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.ServerURL())
	require.NoError(t, err)
	defer conn.Close(ctx)
	name := fmt.Sprintf("baton_cmd_%d", time.Now().UnixNano())
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	require.NoError(t, err)
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), pgtest.ServerURL())
		if err == nil {
			_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
			_ = c.Close(context.Background())
		}
	})
	u, err := withDatabase(pgtest.ServerURL(), name)
	require.NoError(t, err)
	return u
}

// serverPoolConns caps the pool of a server a test keeps running: the test
// packages run side by side against one PostgreSQL whose max_connections is
// 100, and a server's default pool is 40 (two servers and their load once
// took every connection).
const serverPoolConns = 10

// cappedPool returns the database URL u with the pool capped at
// serverPoolConns connections.
func cappedPool(t *testing.T, u string) string {
	t.Helper()
	parsed, err := url.Parse(u)
	require.NoError(t, err)
	q := parsed.Query()
	q.Set("pool_max_conns", strconv.Itoa(serverPoolConns))
	parsed.RawQuery = q.Encode()
	return parsed.String()
}

func command(t *testing.T, env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(binary(t), args...)
	cmd.Env = append(os.Environ(), "BATON_JWT_SECRET=", "DATABASE_URL=")
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// Two processes migrate one empty database at once, then a third migrates it
// again: all succeed and the schema is whole.
func TestMigrateConcurrentlyAndTwice(t *testing.T) {
	t.Parallel()
	url := emptyDatabase(t)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	outs := make([][]byte, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = command(t, []string{"DATABASE_URL=" + url}, "migrate").CombinedOutput()
		}()
	}
	wg.Wait()
	for i := range 2 {
		require.NoError(t, errs[i], "%s", outs[i])
	}
	out, err := command(t, []string{"DATABASE_URL=" + url}, "migrate").CombinedOutput()
	require.NoError(t, err, "%s", out)

	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var tables int
	require.NoError(t, conn.QueryRow(context.Background(),
		`SELECT count(*) FROM information_schema.tables WHERE table_name IN ('agent_execution', 'river_job', 'goose_db_version')`).Scan(&tables))
	require.Equal(t, 3, tables)
	var applied int
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT count(*) FROM goose_db_version WHERE version_id > 0 AND is_applied`).Scan(&applied))
	entries, err := os.ReadDir("../../db/migrations")
	require.NoError(t, err)
	require.Equal(t, len(entries), applied, "each migration applied exactly once")
}

func TestServeRefusesWithoutSecret(t *testing.T) {
	t.Parallel()
	out, err := command(t, []string{"DATABASE_URL=" + emptyDatabase(t)}, "serve").CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "BATON_JWT_SECRET is not set")
}

func TestTokenNeedsSecretAndTenant(t *testing.T) {
	t.Parallel()
	out, err := command(t, nil, "token", "--tenant", "acme").CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "BATON_JWT_SECRET")
	out, err = command(t, []string{"BATON_JWT_SECRET=s3cret"}, "token", "--tenant", "acme").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Len(t, strings.Split(strings.TrimSpace(string(out)), "."), 3)
}

// baton dev migrates, stores the example, serves without auth and prints a
// curl line; the request that line makes runs the example to completion.
func TestDevServesTheExample(t *testing.T) {
	t.Parallel()
	url := emptyDatabase(t)
	cmd := command(t, []string{"DATABASE_URL=" + cappedPool(t, url)}, "dev", "--addr", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = io.Discard
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		_ = cmd.Wait()
	})

	curlLine := regexp.MustCompile(`curl -s -X POST (http://[^ ]+)`)
	dataLine := regexp.MustCompile(`-d '(.*)'`)
	var endpoint, payload string
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(60 * time.Second)
	for payload == "" {
		select {
		case line, ok := <-lines:
			require.True(t, ok, "baton dev exited before printing its curl line")
			if m := curlLine.FindStringSubmatch(line); m != nil {
				endpoint = m[1]
			}
			if m := dataLine.FindStringSubmatch(line); m != nil && endpoint != "" {
				payload = m[1]
			}
		case <-deadline:
			t.Fatal("baton dev printed no curl line within 60s")
		}
	}
	go func() {
		for range lines {
		}
	}()
	req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(payload))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Tenant-ID", "dev")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	require.Contains(t, string(body), `"status":"completed"`)
	require.Contains(t, string(body), `"welcome_back"`)

	// The console is served on the same port, signed in as dev, with River
	// UI for its operator.
	base := strings.TrimSuffix(endpoint, "/api/v1/workflow/execute")
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar}
	for path, want := range map[string]string{
		"/console/":      `<b id="tenant">dev</b>`,
		"/console/jobs/": "River",
	} {
		resp, err := browser.Get(base + path)
		require.NoError(t, err)
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, page)
		require.Contains(t, string(page), want, path)
	}
}

// baton demo plays the recruiting story and prints it in order.
func TestDemoTellsTheStoryInOrder(t *testing.T) {
	t.Parallel()
	out, err := command(t, []string{"DATABASE_URL=" + pgtest.ServerURL()}, "demo").CombinedOutput()
	require.NoError(t, err, "%s", out)
	text := string(out)
	want := []string{
		"recruiting-coordinator  Hola Maria, iniciamos tu proceso",
		"document-collector      Necesito tu INE",
		"document-collector      Documento recibido",
		"recruiting-coordinator  Siguiente paso: te enviaremos una evaluacion",
		"evaluator               Tienes una evaluacion pendiente",
		"evaluator               El test tiene 30 preguntas. ¿Puedes hacerlo hoy?",
		"evaluator               No recibimos tu respuesta. Te contactaremos pronto.",
	}
	at := 0
	for _, w := range want {
		i := strings.Index(text[at:], w)
		require.GreaterOrEqual(t, i, 0, "%q missing or out of order in:\n%s", w, text)
		at += i + len(w)
	}
	require.Contains(t, text, "held")
	require.Regexp(t, `recruiting-coordinator \[exec-[0-9a-f]+, lane main\]: completed`, text)
	require.Regexp(t, `└─ document-collector \[exec-[0-9a-f]+, lane subagent\]: completed`, text)
}
