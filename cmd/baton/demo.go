package main

import (
	"context"
	"embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonrun/baton/db"
	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/internal/pgcluster"
	"github.com/batonrun/baton/jobs"
)

//go:embed demo/*.json
var demoWorkflows embed.FS

// demoTenant and demoThread are where the demo's story happens.
const (
	demoTenant = "demo"
	demoThread = "whatsapp:+5215550001"
)

// timedChannel records when each message reached the channel.
type timedChannel struct {
	mu   sync.Mutex
	sent []timedMessage
}

type timedMessage struct {
	engine.OutboundMessage
	at time.Time
}

func (c *timedChannel) Deliver(_ context.Context, msg engine.OutboundMessage) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent = append(c.sent, timedMessage{msg, time.Now()})
	return nil
}

func (c *timedChannel) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sent)
}

// cmdDemo plays a recruiting story end to end, in-process, on a
// scratch database, and prints the thread's timeline and the execution tree.
func cmdDemo(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	databaseURL := fs.String("database-url", "", "PostgreSQL server to use (DATABASE_URL); a scratch database is created and dropped on it")
	dataDir := fs.String("data-dir", filepath.Join(os.TempDir(), "baton-dev"), "data directory of the private PostgreSQL cluster (used when DATABASE_URL is unset); a cluster baton dev runs there is used and left running, one the demo starts is removed at exit")
	if err := parseFlags(fs, args, envFlag{"database-url", "DATABASE_URL"}); err != nil {
		return err
	}
	say := func(format string, a ...any) { fmt.Fprintf(stdout, format+"\n", a...) }
	serverURL := *databaseURL
	if serverURL == "" {
		say("DATABASE_URL is unset: using the private PostgreSQL cluster in %s", *dataDir)
		// Share: a cluster baton dev owns is used as it is; Remove stops
		// and deletes only a cluster the demo started, as baton dev would.
		cluster, err := pgcluster.Start(ctx, pgcluster.Options{Dir: *dataDir, Share: true})
		if err != nil {
			return fmt.Errorf("starting the private PostgreSQL cluster: %w", err)
		}
		defer func() { _ = cluster.Remove(context.WithoutCancel(ctx)) }()
		serverURL = cluster.URL()
	}
	name := fmt.Sprintf("baton_demo_%d", time.Now().UnixNano())
	dbURL, err := createBenchDatabase(ctx, serverURL, name)
	if err != nil {
		return err
	}
	defer func() { _ = dropBenchDatabase(context.WithoutCancel(ctx), serverURL, name) }()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("connecting to the database: %w", err)
	}
	defer pool.Close()
	if err := db.Migrate(ctx, pool, nil); err != nil {
		return err
	}
	channel := &timedChannel{}
	eng, err := engine.New(engine.Config{Pool: pool, Channel: channel, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	client, err := jobs.NewClient(pool, jobs.Config{Engine: eng})
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return fmt.Errorf("starting River: %w", err)
	}
	defer eng.DeliverPromptly(engine.DefaultPromptSlots)()
	defer jobs.StartTimers(ctx, pool, jobs.TimersConfig{}).Stop()
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = client.Stop(stopCtx)
	}()
	for _, f := range []string{"demo/document-collector.json", "demo/coordinator.json", "demo/evaluator.json"} {
		raw, err := demoWorkflows.ReadFile(f)
		if err != nil {
			return err
		}
		if _, _, err := eng.DefineWorkflow(ctx, pool, demoTenant, raw); err != nil {
			return fmt.Errorf("storing %s: %w", f, err)
		}
	}
	began := time.Now()
	say("\nThe recruiting story on thread %s:\n", demoThread)

	step := func(format string, a ...any) {
		say("  %5.1fs  %s", time.Since(began).Seconds(), fmt.Sprintf(format, a...))
	}
	coord, err := startDemo(ctx, eng, "recruiting-coordinator", map[string]any{"name": "Maria"})
	if err != nil {
		return err
	}
	step("the coordinator %s starts and greets Maria", coord)
	collector, err := waitDemo(ctx, eng, coord, func(x *engine.Execution) (string, bool) {
		id, _ := x.Variables["triggeredExecutionId"].(string)
		return id, x.Status == engine.StatusWaiting && id != ""
	})
	if err != nil {
		return err
	}
	step("it triggers the document collector %s, which inherits the thread's lock", collector)
	if _, err := waitDemo(ctx, eng, collector, waitingFor("document")); err != nil {
		return err
	}
	step("the collector asked for the INE and waits for the upload")
	evaluator, err := startDemo(ctx, eng, "evaluator", nil)
	if err != nil {
		return err
	}
	if _, err := waitDemo(ctx, eng, evaluator, waitingFor("response")); err != nil {
		return err
	}
	step("an independent evaluator %s wants to talk: its two messages are queued", evaluator)
	time.Sleep(time.Second)
	res, err := eng.PublishEvent(ctx, engine.PublishEventParams{TenantID: demoTenant, EventType: "DOCUMENT_UPLOADED", EventID: "demo-ine",
		ExecutionID: collector, Data: map[string]any{"document_type": "INE", "url": "https://files.example/maria/ine.pdf"}})
	if err != nil {
		return err
	}
	step("Maria uploads her INE (DOCUMENT_UPLOADED resumes %s)", strings.Join(res.Resumed, ", "))
	if _, err := waitDemo(ctx, eng, coord, terminalDemo); err != nil {
		return err
	}
	step("the collector thanked her, ended and handed the lock back; the coordinator went on and ended")
	step("the evaluator's queued messages go out; it waits 3s for an answer that never comes")
	if _, err := waitDemo(ctx, eng, evaluator, terminalDemo); err != nil {
		return err
	}
	step("its wait timed out: the timeout action was sent and it ended")
	deadline := time.Now().Add(10 * time.Second)
	for channel.count() < 7 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if err := printTimeline(ctx, stdout, pool, channel, began); err != nil {
		return err
	}
	return printTree(ctx, stdout, eng, pool)
}

func startDemo(ctx context.Context, eng *engine.Engine, workflow string, input map[string]any) (string, error) {
	var id string
	err := eng.WithTx(ctx, func(tx pgx.Tx) error {
		x, err := eng.StartExecution(ctx, tx, engine.StartParams{TenantID: demoTenant, WorkflowID: workflow, ThreadID: demoThread, Input: input, Priority: 5})
		if err != nil {
			return err
		}
		id = x.ExecutionID
		return nil
	})
	return id, err
}

func waitingFor(kind string) func(*engine.Execution) (string, bool) {
	return func(x *engine.Execution) (string, bool) {
		return x.ExecutionID, x.Status == engine.StatusWaiting && x.WaitingFor != nil && *x.WaitingFor == kind
	}
}

func terminalDemo(x *engine.Execution) (string, bool) {
	return x.ExecutionID, engine.IsTerminal(x.Status)
}

// waitDemo polls an execution until done says so, for at most 30 seconds.
func waitDemo(ctx context.Context, eng *engine.Engine, executionID string, done func(*engine.Execution) (string, bool)) (string, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		x, err := eng.GetExecution(ctx, eng.Pool(), demoTenant, executionID)
		if err != nil {
			return "", err
		}
		if v, ok := done(x); ok {
			return v, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("execution %s did not get there (status %s)", executionID, x.Status)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func printTimeline(ctx context.Context, w io.Writer, pool *pgxpool.Pool, channel *timedChannel, began time.Time) error {
	lines, err := dbsqlc.New().MessageTimeline(ctx, pool, &dbsqlc.MessageTimelineParams{TenantID: demoTenant, ThreadID: demoThread})
	if err != nil {
		return fmt.Errorf("reading the thread: %w", err)
	}
	sentAt := map[int64]time.Time{}
	channel.mu.Lock()
	order := append([]timedMessage(nil), channel.sent...)
	channel.mu.Unlock()
	for _, m := range order {
		sentAt[m.ID] = m.at
	}
	sort.SliceStable(lines, func(i, j int) bool { return sentAt[lines[i].ID].Before(sentAt[lines[j].ID]) })
	fmt.Fprintf(w, "\nWhat Maria saw, in the order it reached her channel:\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  SENT\tAGENT\tMESSAGE\tQUEUED")
	rel := func(t time.Time) string { return fmt.Sprintf("%5.1fs", t.Sub(began).Seconds()) }
	for _, l := range lines {
		queued := "-"
		if l.WasQueued {
			queued = fmt.Sprintf("written at %s, held %.1fs for the lock", rel(l.QueuedAt), sentAt[l.ID].Sub(l.QueuedAt).Seconds())
		}
		sent := "not sent (" + l.Status + ")"
		if at, ok := sentAt[l.ID]; ok {
			sent = rel(at)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", sent, l.WorkflowID, l.Body, queued)
	}
	return tw.Flush()
}

func printTree(ctx context.Context, w io.Writer, eng *engine.Engine, pool *pgxpool.Pool) error {
	xs, err := eng.ListExecutions(ctx, pool, demoTenant, engine.ExecutionFilter{Limit: 50})
	if err != nil {
		return err
	}
	children := map[string][]*engine.Execution{}
	var roots []*engine.Execution
	for i := len(xs) - 1; i >= 0; i-- { // oldest first
		x := xs[i]
		if x.ParentExecutionID != nil {
			children[*x.ParentExecutionID] = append(children[*x.ParentExecutionID], x)
		} else {
			roots = append(roots, x)
		}
	}
	fmt.Fprintf(w, "\nExecutions:\n\n")
	var walk func(x *engine.Execution, depth int)
	walk = func(x *engine.Execution, depth int) {
		summary := ""
		if x.ResultSummary != nil {
			summary = " — " + *x.ResultSummary
		}
		fmt.Fprintf(w, "  %s%s %s [%s, lane %s]: %s%s\n", strings.Repeat("   ", depth), map[bool]string{true: "└─", false: "•"}[depth > 0],
			x.WorkflowID, x.ExecutionID, x.Lane, x.Status, summary)
		for _, c := range children[x.ExecutionID] {
			walk(c, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	if len(roots) == 0 {
		return errors.New("no executions found")
	}
	return nil
}
