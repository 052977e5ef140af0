package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	// Ctrl-C, a kill and a closed terminal all stop a command the same
	// way: its context ends and it cleans up (baton dev removes its
	// private cluster) before it exits.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		var ce *commandError
		if errors.As(err, &ce) {
			fmt.Fprintf(os.Stderr, "baton %s: %v\n", ce.command, ce.err)
		} else {
			fmt.Fprintln(os.Stderr, "baton:", err)
		}
		os.Exit(1)
	}
}

// commandError is the error a command failed with, printed after the
// command's name.
type commandError struct {
	command string
	err     error
}

func (e *commandError) Error() string { return e.command + ": " + e.err.Error() }

func (e *commandError) Unwrap() error { return e.err }

// subcommand is one of baton's commands as its help describes it: the top
// level's list of commands, and what `baton <command> -h` prints before
// the command's flags.
type subcommand struct {
	name string
	// synopsis is how the command is called, after "baton ".
	synopsis string
	// summary says in one line what the command does.
	summary string
	// env lists the environment variables the command reads, each as
	// "NAME  what for"; a flag named there overrides its variable.
	env []string
}

// Environment lines that several commands share.
const (
	envAddr       = "BATON_ADDR             listen address (--addr; default 127.0.0.1:8080)"
	envConfig     = "BATON_CONFIG           the config file, JSON5 (--config; default none)"
	envLock       = "BATON_LOCK_TIMEOUT     age after which a thread lock is stale (--lock-timeout; default 10m)"
	envLogLevel   = "BATON_LOG_LEVEL        debug, info, warn or error (--log-level; default info)"
	envMetrics    = "BATON_METRICS_TOKEN    the bearer token GET /metrics requires (default none: /metrics is open)"
	envCallback   = "BATON_CALLBACK_SECRET  signs callbacks; needed, at least 32 bytes, once callbacks.allowHosts is set"
	envWebhook    = "BATON_WEBHOOK_SECRET   signs a webhook channel's messages; needed, at least 32 bytes, with a webhook channel"
	envJWTSecret  = "BATON_JWT_SECRET       HS256 secret of API tokens, at least 32 bytes (openssl rand -hex 32)"
	envPrivateDB  = "DATABASE_URL           the PostgreSQL server (--database-url); unset: a private cluster in --data-dir"
	envRequiredDB = "DATABASE_URL           the PostgreSQL database (--database-url); required"
)

// subcommands are baton's commands, in the order the usage lists them.
var subcommands = []subcommand{
	{name: "serve", synopsis: "serve [--migrate] [--insecure-no-auth] [flags]",
		summary: "run the API, the WebSocket stream, /metrics and the workers on a migrated database (needs BATON_JWT_SECRET unless --insecure-no-auth)",
		env: []string{envRequiredDB, envJWTSecret + "; required unless --insecure-no-auth",
			"BATON_JWT_AUDIENCE     the aud every token must carry (default: auth.audience, else none)",
			"BATON_JWT_ISSUER       the iss every token must carry (default: auth.issuer, else none)",
			envAddr, envConfig, envLock, "BATON_LOG_FORMAT       json or text (--log-format; default json)", envLogLevel, envMetrics, envCallback, envWebhook,
			"BATON_OPERATOR_SECRET  signs operator tokens for River UI, at least 32 bytes, not BATON_JWT_SECRET (default none: no River UI)",
			"BATON_TLS_CERT         serve HTTPS with this PEM certificate (--tls-cert; needs BATON_TLS_KEY)",
			"BATON_TLS_KEY          the PEM private key of BATON_TLS_CERT (--tls-key)"}},
	{name: "migrate", synopsis: "migrate [--database-url URL]",
		summary: "apply River's and Baton's migrations to a database (safe to run twice, and from two processes at once)",
		env:     []string{envRequiredDB}},
	{name: "dev", synopsis: "dev [--data-dir DIR] [flags]",
		summary: "run Baton locally: a private PostgreSQL unless DATABASE_URL is set, migrated, the example workflow, no auth",
		env: []string{envPrivateDB + " (made empty at start, removed at exit)",
			"TMPDIR                 where the default --data-dir, $TMPDIR/baton-dev, is (default /tmp)",
			envAddr, envConfig, envLock, "BATON_LOG_FORMAT       json or text (--log-format; default text)", envLogLevel, envMetrics,
			envCallback + " (dev warns only)", envWebhook + " (dev warns only)"}},
	{name: "demo", synopsis: "demo [--database-url URL] [--data-dir DIR]",
		summary: "play a recruiting conversation end to end on a scratch database and print what the candidate saw",
		env: []string{envPrivateDB + " (a baton dev's, if one runs there)",
			"TMPDIR                 where the default --data-dir, $TMPDIR/baton-dev, is (default /tmp)"}},
	{name: "token", synopsis: `token --tenant T [--scope "workflows:read monitor:read"] [--ttl 24h] [flags] | token --operator [--sub NAME]`,
		summary: "mint an API token for a tenant, signed with BATON_JWT_SECRET, or with --operator River UI's operator token, signed with BATON_OPERATOR_SECRET, and print it",
		env: []string{envJWTSecret + "; required for a tenant's token, the same as the server's",
			"BATON_OPERATOR_SECRET  required with --operator, the same as the server's",
			"BATON_JWT_AUDIENCE     the token's aud (--aud; default none)",
			"BATON_JWT_ISSUER       the token's iss (--iss; default none)"}},
	{name: "bench", synopsis: "bench [--retention 5s] [flags]",
		summary: "measure Baton against bare River and the commit rate, on a database of its own",
		env: []string{envPrivateDB + " (default $TMPDIR/baton-bench)",
			"TMPDIR                 where the default --data-dir is (default /tmp)"}},
	{name: "soak", synopsis: "soak [--duration 30m] [--rate 200] [--retention 2m] [flags]",
		summary: "run a steady mixed load with short retention for a long time, on a database of its own, and sample it every minute (table sizes, latency, heap)",
		env: []string{envPrivateDB + " (default $TMPDIR/baton-soak)",
			"TMPDIR                 where the default --data-dir is (default /tmp)"}},
	{name: "monitor", synopsis: "monitor [--tenant T] [--watch [interval]] [--json] [--limit N]",
		summary: "print the monitoring views as tables, once or refreshed until interrupted",
		env:     []string{envRequiredDB}},
}

// usage is what baton prints without a command, or for help: its commands,
// each in one line.
var usage = func() string {
	var b strings.Builder
	b.WriteString("usage: baton <command> [flags]\n\ncommands:\n")
	for _, c := range subcommands {
		fmt.Fprintf(&b, "  %-9s %s\n", c.name, c.summary)
	}
	b.WriteString("\nRun \"baton <command> -h\" for what a command does, the environment it reads and its flags.")
	return b.String()
}()

// printHelp writes `baton <command> -h`: how the command is called, what it
// does, the environment it reads, and its flags.
func printHelp(w io.Writer, fs *flag.FlagSet) {
	synopsis, summary, env := fs.Name()+" [flags]", "", []string(nil)
	for _, c := range subcommands {
		if c.name == fs.Name() {
			synopsis, summary, env = c.synopsis, c.summary, c.env
		}
	}
	fmt.Fprintf(w, "usage: baton %s\n\n%s.\n", synopsis, upperFirst(summary))
	if len(env) > 0 {
		fmt.Fprintln(w, "\nenvironment (a flag named here wins over its variable):")
		for _, e := range env {
			fmt.Fprintln(w, "  "+e)
		}
	}
	fmt.Fprintln(w, "\nflags:")
	out := fs.Output()
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(out)
}

// upperFirst returns s with its first letter in upper case.
func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, usage)
		return fmt.Errorf("no command given")
	}
	if err := runCommand(ctx, args); err != nil {
		return &commandError{command: args[0], err: err}
	}
	return nil
}

func runCommand(ctx context.Context, args []string) error {
	switch args[0] {
	case "serve":
		return cmdServe(ctx, args[1:])
	case "migrate":
		return cmdMigrate(ctx, args[1:])
	case "dev":
		return cmdDev(ctx, args[1:])
	case "demo":
		return cmdDemo(ctx, args[1:], os.Stdout)
	case "token":
		return cmdToken(args[1:])
	case "bench":
		return cmdBench(ctx, args[1:], os.Stdout)
	case "soak":
		return cmdSoak(ctx, args[1:], os.Stdout)
	case "monitor":
		return cmdMonitor(ctx, args[1:])
	case "help", "-h", "--help":
		fmt.Println(usage)
		return nil
	}
	fmt.Fprintln(os.Stderr, usage)
	return fmt.Errorf("unknown command")
}
