package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
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

const usage = `usage: baton <command> [flags]

commands:
  serve     run the API and the workers (needs BATON_JWT_SECRET unless --insecure-no-auth)
  migrate   apply River's and Baton's migrations
  dev       run Baton locally: a private PostgreSQL unless DATABASE_URL is set, migrated, an example workflow, no auth
  demo      play a recruiting conversation end to end and print what the candidate saw
  token     mint an API token: baton token --tenant T [--scope "workflows:read monitor:read"]
  bench     measure Baton against bare River and the commit rate, on a database of its own (DATABASE_URL, else a private PostgreSQL)
  soak      a steady mixed load with short retention for a long time, sampled every minute (table sizes, latency, heap)
  monitor   the monitoring views as tables: baton monitor [--tenant T] [--watch [interval]] [--json]

Run "baton <command> -h" for a command's flags.`

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
