package main

import (
	"context"
	"fmt"
	"slices"

	"github.com/batonrun/baton/bench/peers/internal/batonpeer"
	"github.com/batonrun/baton/bench/peers/internal/dbospeer"
	"github.com/batonrun/baton/bench/peers/internal/report"
)

// declare lists the figures in the order a round measures them — every
// Baton figure, then every DBOS figure — keeps those c.only names (all when
// it is empty), and declares their series and the ratios to report.
func declare(book *report.Book, c config, bb *batonpeer.Bench, dbb *dbospeer.Bench) []figure {
	fiveNode := func(w dbospeer.Workflow) func(context.Context, int) (report.Measurement, error) {
		return func(ctx context.Context, round int) (report.Measurement, error) { return dbb.FiveNode(ctx, round, w) }
	}
	keyed := func(w dbospeer.Workflow) func(context.Context, int) (report.Measurement, error) {
		return func(ctx context.Context, round int) (report.Measurement, error) { return dbb.Keyed(ctx, round, w) }
	}
	keyedWhat := fmt.Sprintf("%d keys, %d clients", c.keys, c.keyedClients)
	figures := []figure{
		{report.Series{Key: "1/baton", Figure: "1", System: "Baton", What: fmt.Sprintf("five-node run, StartExecution, %d clients", c.clients)}, bb.FiveNode},
		{report.Series{Key: "2/baton", Figure: "2", System: "Baton", What: "resume: PublishEvent → run done"}, bb.Resume},
		{report.Series{Key: "3/baton-inbound", Figure: "3", System: "Baton", What: "inbound messages (ReceiveInboundTx), " + keyedWhat}, bb.Inbound},
		{report.Series{Key: "3/baton-keyed", Figure: "3", System: "Baton", What: "StartExecution with SessionKey, " + keyedWhat}, bb.KeyedStarts},
		{report.Series{Key: "4/floor", Figure: "4", System: "River", What: fmt.Sprintf("bare chained jobs, %d chains (steps/s)", c.chains)}, bb.Floor},
		{report.Series{Key: "1/dbos-steps", Figure: "1", System: "DBOS", What: fmt.Sprintf("five-node run, a step per node, %d clients", c.clients)}, fiveNode(dbospeer.Steps)},
		{report.Series{Key: "1/dbos-tx", Figure: "1", System: "DBOS", What: fmt.Sprintf("five-node run, one transactional step, %d clients", c.clients)}, fiveNode(dbospeer.Tx)},
		{report.Series{Key: "2/dbos", Figure: "2", System: "DBOS", What: "resume: Send → Recv → step → result"}, dbb.Resume},
		{report.Series{Key: "3/dbos-steps", Figure: "3", System: "DBOS", What: "partitioned queue, a step per node, " + keyedWhat}, keyed(dbospeer.Steps)},
		{report.Series{Key: "3/dbos-tx", Figure: "3", System: "DBOS", What: "partitioned queue, one transactional step, " + keyedWhat}, keyed(dbospeer.Tx)},
	}
	figures = slices.DeleteFunc(figures, func(f figure) bool { return len(c.only) > 0 && !slices.Contains(c.only, f.series.Key) })
	for _, f := range figures {
		book.Declare(f.series)
	}
	for _, r := range []report.Ratio{
		{Figure: "1", Num: "1/baton", Den: "4/floor", Metric: "throughput"},
		{Figure: "1", Num: "1/dbos-steps", Den: "1/baton", Metric: "throughput"},
		{Figure: "1", Num: "1/dbos-tx", Den: "1/baton", Metric: "throughput"},
		{Figure: "1", Num: "1/dbos-steps", Den: "1/baton", Metric: "p50"},
		{Figure: "1", Num: "1/dbos-tx", Den: "1/baton", Metric: "p50"},
		{Figure: "2", Num: "2/dbos", Den: "2/baton", Metric: "p50"},
		{Figure: "3", Num: "3/baton-keyed", Den: "3/baton-inbound", Metric: "throughput"},
		{Figure: "3", Num: "3/dbos-steps", Den: "3/baton-inbound", Metric: "throughput"},
		{Figure: "3", Num: "3/dbos-tx", Den: "3/baton-inbound", Metric: "throughput"},
		{Figure: "3", Num: "3/dbos-steps", Den: "3/baton-keyed", Metric: "throughput"},
		{Figure: "3", Num: "3/dbos-tx", Den: "3/baton-keyed", Metric: "throughput"},
	} {
		book.Compare(r)
	}
	return figures
}
