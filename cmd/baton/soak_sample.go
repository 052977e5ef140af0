package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonrun/baton/internal/benchkit"
)

// soakSample is one row of the soak: what the load did in the last
// sample period, and how big the database and the heap were at its end.
type soakSample struct {
	At                   time.Duration // since the load began
	PerSecond            float64       // executions that reached a terminal state, a second
	RunP50, RunP99       time.Duration // five-node start → terminal
	ResumeP50, ResumeP99 time.Duration // event → the run terminal
	InP50, InP99         time.Duration // inbound message → its run terminal
	Sizes                soakSizes
	DeadTuples           int64
	HeapBytes            uint64 // live Go heap after a collection
}

// soakSizes are pg_total_relation_size of Baton's tables (heap, indexes and
// TOAST), in bytes.
type soakSizes struct {
	Total, Executions, Events, Messages, Inbound, Idempotency, Jobs int64
}

const sqlSoakSizes = `SELECT
  coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint,
  coalesce(sum(pg_total_relation_size(c.oid)) FILTER (WHERE c.relname = 'agent_execution'), 0)::bigint,
  coalesce(sum(pg_total_relation_size(c.oid)) FILTER (WHERE c.relname = 'execution_event'), 0)::bigint,
  coalesce(sum(pg_total_relation_size(c.oid)) FILTER (WHERE c.relname = 'thread_message'), 0)::bigint,
  coalesce(sum(pg_total_relation_size(c.oid)) FILTER (WHERE c.relname = 'inbound_event'), 0)::bigint,
  coalesce(sum(pg_total_relation_size(c.oid)) FILTER (WHERE c.relname = 'idempotency_key'), 0)::bigint,
  coalesce(sum(pg_total_relation_size(c.oid)) FILTER (WHERE c.relname = 'river_job'), 0)::bigint,
  (SELECT coalesce(sum(n_dead_tup), 0)::bigint FROM pg_stat_user_tables)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND n.nspname = current_schema()`

// takeSample turns a window of the load into a sample taken at, over
// period.
func takeSample(ctx context.Context, pool *pgxpool.Pool, w soakWindow, at, period time.Duration) (soakSample, error) {
	s := soakSample{
		At: at, PerSecond: float64(w.terminal()) / period.Seconds(),
		RunP50: w.runs.Percentile(0.5), RunP99: w.runs.Percentile(0.99),
		ResumeP50: w.resumes.Percentile(0.5), ResumeP99: w.resumes.Percentile(0.99),
		InP50: w.inbound.Percentile(0.5), InP99: w.inbound.Percentile(0.99),
	}
	z := &s.Sizes
	if err := pool.QueryRow(ctx, sqlSoakSizes).Scan(&z.Total, &z.Executions, &z.Events, &z.Messages, &z.Inbound, &z.Idempotency, &z.Jobs, &s.DeadTuples); err != nil {
		return s, fmt.Errorf("reading table sizes: %w", err)
	}
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	s.HeapBytes = m.HeapAlloc
	return s, nil
}

func mb(b int64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }

func printSoakHeader(table, csv io.Writer) {
	fmt.Fprintf(table, "%-6s %8s %15s %15s %15s %9s %8s %8s %8s %8s %10s %8s\n",
		"MIN", "EXEC/S", "RUN P50/P99", "RESUME P50/P99", "INBOUND P50/P99", "TOTAL MB", "EXEC MB", "EVENT MB", "MSG MB", "JOBS MB", "DEAD TUP", "HEAP MB")
	fmt.Fprintln(csv, "minute,executions_per_s,run_p50_ms,run_p99_ms,resume_p50_ms,resume_p99_ms,inbound_p50_ms,inbound_p99_ms,"+
		"total_bytes,execution_bytes,event_bytes,message_bytes,inbound_bytes,idempotency_bytes,job_bytes,dead_tuples,heap_bytes")
}

func printSoakSample(table, csv io.Writer, s soakSample) {
	pair := func(a, b time.Duration) string { return benchkit.Ms(a) + "/" + benchkit.Ms(b) }
	z := s.Sizes
	fmt.Fprintf(table, "%-6.1f %8.1f %15s %15s %15s %9s %8s %8s %8s %8s %10d %8s\n",
		s.At.Minutes(), s.PerSecond, pair(s.RunP50, s.RunP99), pair(s.ResumeP50, s.ResumeP99), pair(s.InP50, s.InP99),
		mb(z.Total), mb(z.Executions), mb(z.Events), mb(z.Messages), mb(z.Jobs), s.DeadTuples, mb(int64(s.HeapBytes)))
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)) }
	fmt.Fprintf(csv, "%.2f,%.2f,%s,%s,%s,%s,%s,%s,%d,%d,%d,%d,%d,%d,%d,%d,%d\n",
		s.At.Minutes(), s.PerSecond, ms(s.RunP50), ms(s.RunP99), ms(s.ResumeP50), ms(s.ResumeP99), ms(s.InP50), ms(s.InP99),
		z.Total, z.Executions, z.Events, z.Messages, z.Inbound, z.Idempotency, z.Jobs, s.DeadTuples, s.HeapBytes)
}

// soakSpan is the mean of the samples taken in (from, to].
type soakSpan struct {
	n                 int
	perSecond         float64
	runP99, resumeP99 float64 // ms
	heap              float64 // bytes
}

func spanOf(samples []soakSample, from, to time.Duration) soakSpan {
	var s soakSpan
	for _, x := range samples {
		if x.At <= from || x.At > to+time.Second {
			continue
		}
		s.n++
		s.perSecond += x.PerSecond
		s.runP99 += float64(x.RunP99) / float64(time.Millisecond)
		s.resumeP99 += float64(x.ResumeP99) / float64(time.Millisecond)
		s.heap += float64(x.HeapBytes)
	}
	if s.n > 0 {
		k := float64(s.n)
		s.perSecond, s.runP99, s.resumeP99, s.heap = s.perSecond/k, s.runP99/k, s.resumeP99/k, s.heap/k
	}
	return s
}

// sizeAt is the total size sampled at or just after minute m, or -1.
func sizeAt(samples []soakSample, m time.Duration) int64 {
	for _, x := range samples {
		if x.At+time.Second >= m {
			return x.Sizes.Total
		}
	}
	return -1
}

// printSoakVerdict prints the size curve and compares the last five
// minutes with minutes 5–10 (throughput, p99, heap): within 10 % is flat.
func printSoakVerdict(w io.Writer, samples []soakSample) {
	if len(samples) == 0 {
		return
	}
	end := samples[len(samples)-1].At
	fmt.Fprintf(w, "\ntotal size of Baton's tables (MB):")
	for _, m := range []time.Duration{5, 10, 20, 30} {
		if at := sizeAt(samples, m*time.Minute); at >= 0 && m*time.Minute <= end+time.Second {
			fmt.Fprintf(w, "  %d min %s", m, mb(at))
		}
	}
	fmt.Fprintln(w)
	early, late := spanOf(samples, 5*time.Minute, 10*time.Minute), spanOf(samples, end-5*time.Minute, end)
	if early.n == 0 || late.n == 0 || end < 15*time.Minute {
		fmt.Fprintln(w, "run 15 minutes or more to compare the last five minutes with minutes 5–10")
		return
	}
	ratio := func(what string, a, b float64) {
		fmt.Fprintf(w, "%-28s minutes 5–10 %10.1f   last 5 %10.1f   ratio %.3f\n", what, a, b, b/a)
	}
	ratio("executions/s", early.perSecond, late.perSecond)
	ratio("five-node p99 (ms)", early.runP99, late.runP99)
	ratio("resume p99 (ms)", early.resumeP99, late.resumeP99)
	ratio("Go heap (MB)", early.heap/(1<<20), late.heap/(1<<20))
}
