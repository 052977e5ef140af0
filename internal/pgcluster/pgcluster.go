package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// serverUser is the OS user that runs PostgreSQL when this process is root,
// and the database superuser that initdb creates.
const serverUser = "postgres"

// socketDirName is the directory inside the data directory that holds the
// server's Unix socket, so that the cluster never touches /var/run/postgresql.
const socketDirName = "socket"

// maxSocketPath is the longest Unix socket path that every platform accepts
// (sun_path is 104 bytes on the BSDs and macOS, 108 on Linux, NUL included).
const maxSocketPath = 103

// readyTimeout bounds the wait for a started server to accept connections
// when ctx has no earlier deadline.
const readyTimeout = 60 * time.Second

// Options configures Start.
type Options struct {
	// Dir is the cluster's data directory. It is required. Start creates it
	// when it does not exist, runs initdb when it holds no cluster yet (no
	// PG_VERSION file), and reuses the cluster otherwise. When the process
	// runs as root, the server runs as the postgres OS user, so Start hands
	// Dir to that user, and every parent directory of Dir must be searchable
	// by it (as /tmp is; os.MkdirTemp and t.TempDir create 0700 directories,
	// which must be chmodded to 0755 first).
	Dir string

	// Port is the TCP port the server listens on at 127.0.0.1. The default,
	// 0, reuses the port of a cluster already running in Dir, and otherwise
	// picks a free port. A non-zero Port that differs from the port of a
	// cluster already running in Dir is an error.
	Port int

	// Fast turns off fsync, trading crash safety for speed, and skips
	// initdb's final sync. Tests set it; `baton dev` leaves it false, the
	// default, so that its data survives a crash of the machine.
	Fast bool

	// Logger receives a line for each step Start and Stop take. The default,
	// nil, discards them.
	Logger *slog.Logger

	// SynchronousStandby names the standby whose confirmation every commit
	// on this server waits for: its StandbyName, the application_name it
	// connects with. Start passes it on the server's command line as
	// synchronous_standby_names (synchronous_commit stays on, PostgreSQL's
	// default), never in the data directory, so that a standby copied from
	// this cluster does not inherit it and, once promoted, does not wait for
	// a standby it does not have. It must be made of ASCII letters, digits
	// and underscores, and cannot be set together with Primary. The
	// default, "", waits for no standby.
	SynchronousStandby string

	// Primary, when set, makes this cluster a streaming standby of that
	// running cluster: when Dir holds no cluster yet, Start copies Primary
	// with pg_basebackup -R -X stream instead of running initdb, and the
	// server it starts replays Primary's WAL as it streams in, answering
	// read-only queries meanwhile (hot_standby, on by default). A Dir that
	// already holds a cluster is reused as it is, standby or not. The
	// default, nil, makes a primary.
	Primary *Cluster

	// Share lets Start return a guest when another live process, or another
	// Cluster of this process, owns Dir: the guest uses the server (starting
	// it if it is down, as after its owner's StopImmediate) but never stops
	// it. Without Share, Start then fails with ErrInUse.
	Share bool

	// Fresh makes Start begin from an empty cluster, for a cluster that
	// holds nothing worth keeping (Remove deletes it afterwards): a cluster
	// an earlier owner left in Dir, such as one whose process was killed,
	// is stopped if its server still runs, and deleted before initdb. Only
	// a cluster this package initialized is deleted: a Dir that holds
	// anything else is refused with ErrForeignDir and left as it is. It
	// cannot be set together with Share, whose guest must not delete its
	// owner's cluster. The default, false, reuses the cluster Dir holds.
	Fresh bool

	// StandbyName is the application_name a standby connects to its Primary
	// with, written into its primary_conninfo; a primary whose
	// SynchronousStandby is this name waits for it. It must be made of ASCII
	// letters, digits and underscores. It only applies with Primary; the
	// default, "", means DefaultStandbyName.
	StandbyName string
}

// DefaultStandbyName is the application_name of a standby whose Options give
// no StandbyName.
const DefaultStandbyName = "standby"

// Cluster is a PostgreSQL server running from a data directory, as returned
// by Start. Its methods are safe for concurrent use.
type Cluster struct {
	dir    string
	port   int
	bins   binaries
	runAs  *syscall.Credential
	logger *slog.Logger

	mu sync.Mutex
	// lock is the data directory, open and flocked while this Cluster owns
	// it (owner.go); nil for a guest, and once Stop has run.
	lock *os.File
}

// Start returns a running cluster in opts.Dir, initializing it (initdb, or a
// copy of opts.Primary for a standby) and starting it as needed, once the
// server accepts connections. A cluster already running in opts.Dir is
// reused as it is, port included, whatever the replication options say,
// unless opts.Fresh discards it first.
//
// The returned Cluster owns the data directory (Owner) unless another live
// process, or another Cluster of this one, owns it already: then Start
// returns ErrInUse, or with opts.Share a guest Cluster, whose Stop leaves
// the server to its owner.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Dir == "" {
		return nil, errors.New("starting PostgreSQL cluster: Options.Dir is empty")
	}
	if opts.Port < 0 || opts.Port > 65535 {
		return nil, fmt.Errorf("starting PostgreSQL cluster: Options.Port %d is out of range", opts.Port)
	}
	if opts.Fresh && opts.Share {
		return nil, errors.New("starting PostgreSQL cluster: Options.Fresh and Options.Share cannot both be set: a guest must not delete its owner's cluster")
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("resolving cluster directory %q: %w", opts.Dir, err)
	}
	settings, err := serverSettings(opts)
	if err != nil {
		return nil, err
	}
	bins, err := findBinaries()
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, bins: bins, logger: logger.With("dir", dir)}

	if err := c.prepareDir(); err != nil {
		return nil, err
	}
	if err := c.claim(opts.Share); err != nil {
		return nil, err
	}
	if opts.Fresh {
		if err := c.discard(ctx); err != nil {
			c.release()
			return nil, fmt.Errorf("starting a fresh PostgreSQL cluster: %w", err)
		}
	}
	if err := c.startOrReuse(ctx, opts, settings); err != nil {
		c.release()
		return nil, err
	}
	return c, nil
}

// startOrReuse initializes the cluster when the data directory holds none
// yet, reuses the server when one runs there, and starts it otherwise.
func (c *Cluster) startOrReuse(ctx context.Context, opts Options, settings []string) error {
	initialized, err := fileExists(filepath.Join(c.dir, "PG_VERSION"))
	if err != nil {
		return fmt.Errorf("checking for a cluster in %s: %w", c.dir, err)
	}
	switch {
	case !initialized && !c.Owner():
		return fmt.Errorf("starting PostgreSQL cluster: the process that owns %s has not initialized its cluster yet", c.dir)
	case !initialized && opts.Primary != nil:
		if err := c.basebackup(ctx, opts.Primary, opts.StandbyName, opts.Fast); err != nil {
			return err
		}
		if err := c.writeMarker(); err != nil {
			return err
		}
	case !initialized:
		if err := c.initdb(ctx, opts.Fast); err != nil {
			return err
		}
		if err := c.writeMarker(); err != nil {
			return err
		}
	default:
		running, err := c.running(ctx)
		if err != nil {
			return err
		}
		if running {
			return c.reuse(ctx, opts.Port)
		}
		c.logger.InfoContext(ctx, "reusing initialized PostgreSQL cluster")
	}
	if err := c.start(ctx, opts.Port, opts.Fast, settings); err != nil {
		return err
	}
	return c.waitReady(ctx)
}

// reuse takes the port of the server running in the data directory, which
// must be port unless that is 0, and waits until it accepts connections.
func (c *Cluster) reuse(ctx context.Context, port int) error {
	running, err := c.runningPort()
	if err != nil {
		return err
	}
	if port != 0 && port != running {
		return fmt.Errorf("starting PostgreSQL cluster: the cluster in %s is already running on port %d, not %d", c.dir, running, port)
	}
	c.port = running
	c.logger.InfoContext(ctx, "reusing running PostgreSQL cluster", "port", running, "owner", c.Owner())
	return c.waitReady(ctx)
}

// URL returns a postgres:// URL for the superuser postgres and the database
// postgres, over TCP without TLS.
func (c *Cluster) URL() string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/postgres?sslmode=disable", serverUser, c.port)
}

// Port returns the TCP port the server listens on at 127.0.0.1.
func (c *Cluster) Port() int {
	return c.port
}

// Dir returns the cluster's absolute data directory.
func (c *Cluster) Dir() string {
	return c.dir
}

// Stop shuts the server down with pg_ctl's fast mode, which rolls back open
// transactions and disconnects every client, waits until it has exited,
// and gives up the ownership of the data directory. Only the owner stops
// the server (see Owner), whether Start started it or found it running
// without a live owner; Stop on a guest, or on a Cluster already stopped,
// does nothing. Stopping a server that is not running does nothing either.
func (c *Cluster) Stop(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lock == nil {
		return nil
	}
	if err := c.stopServer(ctx); err != nil {
		return err
	}
	c.releaseLocked()
	return nil
}

// stopServer stops the server running in the data directory, if one runs,
// with pg_ctl's fast mode, and waits until it has exited.
func (c *Cluster) stopServer(ctx context.Context) error {
	running, err := c.running(ctx)
	if err != nil || !running {
		return err
	}
	start := time.Now()
	if out, err := c.run(ctx, c.bins.pgCtl, "stop", "-D", c.dir, "-m", "fast", "-w"); err != nil {
		return fmt.Errorf("stopping PostgreSQL cluster in %s: %w: %s", c.dir, err, out)
	}
	c.logger.InfoContext(ctx, "stopped PostgreSQL cluster", "port", c.port, "took", time.Since(start))
	return nil
}

// prepareDir creates the data directory and, when running as root, works out
// the postgres OS user's credentials, hands it the directory, and checks that
// it can reach it.
func (c *Cluster) prepareDir() error {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return fmt.Errorf("creating cluster directory %s: %w", c.dir, err)
	}
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup(serverUser)
	if err != nil {
		return fmt.Errorf("looking up OS user %q, which runs PostgreSQL since it refuses to run as root: %w", serverUser, err)
	}
	cred, err := credential(u)
	if err != nil {
		return err
	}
	if err := os.Chown(c.dir, int(cred.Uid), int(cred.Gid)); err != nil {
		return fmt.Errorf("handing cluster directory %s to OS user %s: %w", c.dir, serverUser, err)
	}
	if err := checkSearchable(filepath.Dir(c.dir), cred); err != nil {
		return err
	}
	c.runAs = cred
	return nil
}

// credential returns the uid, gid and supplementary groups of u.
func credential(u *user.User) (*syscall.Credential, error) {
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("parsing uid %q of OS user %s: %w", u.Uid, u.Username, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("parsing gid %q of OS user %s: %w", u.Gid, u.Username, err)
	}
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	groupIDs, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("listing groups of OS user %s: %w", u.Username, err)
	}
	for _, g := range groupIDs {
		id, err := strconv.ParseUint(g, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("parsing group id %q of OS user %s: %w", g, u.Username, err)
		}
		cred.Groups = append(cred.Groups, uint32(id))
	}
	return cred, nil
}

// checkSearchable reports an error unless the user cred can search (traverse)
// dir and each of its parents, which it needs to reach the data directory.
func checkSearchable(dir string, cred *syscall.Credential) error {
	for {
		info, err := os.Stat(dir)
		if err != nil {
			return fmt.Errorf("checking access to %s: %w", dir, err)
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if ok && !searchable(info.Mode().Perm(), st.Uid, st.Gid, cred) {
			return fmt.Errorf("OS user %s, which runs PostgreSQL, cannot search directory %s (mode %v): every parent of the cluster directory must be searchable by it, for example with chmod 0755",
				serverUser, dir, info.Mode().Perm())
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil
		}
		dir = parent
	}
}

// searchable reports whether a directory with permissions perm, owned by
// uid and gid, can be searched by the user cred.
func searchable(perm os.FileMode, uid, gid uint32, cred *syscall.Credential) bool {
	switch {
	case uid == cred.Uid:
		return perm&0o100 != 0
	case gid == cred.Gid || slices.Contains(cred.Groups, gid):
		return perm&0o010 != 0
	default:
		return perm&0o001 != 0
	}
}

// initdb creates a new cluster in the (empty) data directory.
func (c *Cluster) initdb(ctx context.Context, fast bool) error {
	start := time.Now()
	args := []string{
		"-D", c.dir,
		"-U", serverUser,
		"--auth=trust",
		"--encoding=UTF8",
		"--locale=C",
	}
	if fast {
		args = append(args, "--no-sync")
	}
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		return fmt.Errorf("reading cluster directory %s: %w", c.dir, err)
	}
	if out, err := c.run(ctx, c.bins.initdb, args...); err != nil {
		// initdb removes what it wrote when it fails, but not when it is
		// killed, as when ctx ends: a directory it found empty is emptied
		// again, so that no half-made cluster is left without a marker.
		err = fmt.Errorf("initializing PostgreSQL cluster in %s: %w: %s", c.dir, err, out)
		if len(entries) == 0 {
			return errors.Join(err, c.empty())
		}
		return err
	}
	c.logger.InfoContext(ctx, "initialized PostgreSQL cluster", "took", time.Since(start))
	return nil
}

// start starts the server on port, or on a free port when port is 0, with
// the extra settings (name=value, each passed as -c). It retries with
// another free port when the one it picked was taken in the meantime.
func (c *Cluster) start(ctx context.Context, port int, fast bool, settings []string) error {
	socketDir := filepath.Join(c.dir, socketDirName)
	if err := os.MkdirAll(socketDir, 0o700); err != nil {
		return fmt.Errorf("creating socket directory %s: %w", socketDir, err)
	}
	if c.runAs != nil {
		if err := os.Chown(socketDir, int(c.runAs.Uid), int(c.runAs.Gid)); err != nil {
			return fmt.Errorf("handing socket directory %s to OS user %s: %w", socketDir, serverUser, err)
		}
	}
	logFile := filepath.Join(c.dir, "log")

	const attempts = 3
	for attempt := 1; ; attempt++ {
		p := port
		if p == 0 {
			var err error
			if p, err = freePort(); err != nil {
				return err
			}
		}
		// Unix sockets are only for local tools such as psql -h Dir/socket;
		// when the path would be too long, the server listens on TCP alone.
		sockets := socketDir
		if len(filepath.Join(socketDir, ".s.PGSQL.65535")) > maxSocketPath {
			sockets = ""
		}
		// pg_ctl runs the server through /bin/sh, so -o is quoted for it.
		serverOpts := []string{
			"-p", strconv.Itoa(p),
			"-k", shellQuote(sockets),
			"-c", "listen_addresses=127.0.0.1",
		}
		if fast {
			serverOpts = append(serverOpts, "-c", "fsync=off")
		}
		for _, setting := range settings {
			serverOpts = append(serverOpts, "-c", shellQuote(setting))
		}
		logStart := fileSize(logFile)
		start := time.Now()
		out, err := c.run(ctx, c.bins.pgCtl, "start", "-D", c.dir, "-l", logFile, "-w", "-o", strings.Join(serverOpts, " "))
		if err == nil {
			c.port = p
			c.logger.InfoContext(ctx, "started PostgreSQL cluster", "port", p, "fast", fast, "took", time.Since(start))
			return nil
		}
		serverLog := readFrom(logFile, logStart)
		if port == 0 && attempt < attempts && strings.Contains(serverLog, "already in use") && ctx.Err() == nil {
			c.logger.InfoContext(ctx, "port taken, retrying with another", "port", p)
			continue
		}
		return fmt.Errorf("starting PostgreSQL cluster in %s: %w: %s\nserver log:\n%s", c.dir, err, out, serverLog)
	}
}

// running reports whether pg_ctl sees a server running in the data directory.
func (c *Cluster) running(ctx context.Context) (bool, error) {
	out, err := c.run(ctx, c.bins.pgCtl, "status", "-D", c.dir)
	if err == nil {
		return true, nil
	}
	// pg_ctl status exits with 3 when no server runs in an existing data
	// directory, and with 4 when there is no accessible data directory.
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) && exitErr.ExitCode() == 3 {
		return false, nil
	}
	return false, fmt.Errorf("checking whether the PostgreSQL cluster in %s is running: %w: %s", c.dir, err, out)
}

// runningPort returns the port from postmaster.pid, whose fourth line holds
// it.
func (c *Cluster) runningPort() (int, error) {
	path := filepath.Join(c.dir, "postmaster.pid")
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("reading the running cluster's port: %w", err)
	}
	lines := strings.Split(string(data), "\n")
	if len(lines) < 4 {
		return 0, fmt.Errorf("reading the running cluster's port: %s has %d lines, want at least 4", path, len(lines))
	}
	port, err := strconv.Atoi(strings.TrimSpace(lines[3]))
	if err != nil || port <= 0 || port > 65535 {
		return 0, fmt.Errorf("reading the running cluster's port: line 4 of %s is %q, not a port", path, lines[3])
	}
	return port, nil
}

// waitReady returns once the server accepts a connection and answers a
// query, or with the last connection error when ctx ends or readyTimeout
// passes first.
func (c *Cluster) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	start := time.Now()
	var lastErr error
	for {
		lastErr = ping(ctx, c.URL())
		if lastErr == nil {
			c.logger.DebugContext(ctx, "PostgreSQL cluster accepts connections", "port", c.port, "took", time.Since(start))
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for PostgreSQL on port %d to accept connections: %w (last error: %w)", c.port, ctx.Err(), lastErr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ping connects to url, runs one query, and disconnects, giving up after a
// couple of seconds.
func ping(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, "SELECT 1")
	return err
}

// run runs a PostgreSQL program, as the postgres OS user when this process is
// root, and returns its combined output.
func (c *Cluster) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = c.dir
	cmd.Env = childEnv()
	if c.runAs != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.runAs}
	}
	c.logger.DebugContext(ctx, "running PostgreSQL program", "cmd", cmd.String())
	out, err := cmd.CombinedOutput()
	return bytes.TrimSpace(out), err
}

// childEnv returns this process's environment without the variables that
// would point PostgreSQL's programs at another cluster or server, with
// messages forced to English so that errors can be read back.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "PG") || name == "LC_ALL" || name == "LC_MESSAGES" || name == "LANGUAGE" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LC_MESSAGES=C")
}

// absPath makes a path found on PATH absolute, since the programs run with
// the data directory as their working directory; it keeps p when it cannot.
func absPath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

// fileExists reports whether path exists.
func fileExists(path string) (bool, error) {
	_, err := os.Stat(path)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return false, err
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("picking a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// shellQuote quotes s as one word for /bin/sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// fileSize returns the size of path, or 0 when it cannot be read.
func fileSize(path string) int64 {
	info, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return info.Size()
}

// readFrom returns what path holds from offset on, at most its last 8 KiB,
// for error messages.
func readFrom(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	defer f.Close()
	const limit = 8 << 10
	if size := fileSize(path); size-offset > limit {
		offset = size - limit
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	return strings.TrimSpace(string(data))
}
