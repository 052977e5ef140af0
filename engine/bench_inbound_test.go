package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/engine"
)

// BenchmarkInboundReply: one inbound message at a time on an idle session
// (a new thread each time, whose default workflow answers at once). reply_*
// is the message arriving (ReceiveInboundTx called, what POST
// /threads/{id}/messages runs) → the reply seen delivered by a 0.5 ms poll;
// accept_* is the router's transaction, up to its commit (the run starts
// and its first step runs in it); deliver_* is that commit → the channel
// took the reply (delivered_at).
func BenchmarkInboundReply(b *testing.B) {
	bb := benchSetup(b, nil)
	bb.define(b, `{"workflow_id": "echo", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "reply"},
	  {"id": "reply", "type": "action", "actionType": "send_message", "parameters": {"message": "re: {{lastResponse}}"}, "next": "end"},
	  {"id": "end", "type": "end"}]}`)
	ctx := context.Background()
	replies := make([]time.Duration, 0, b.N)
	accepts := make([]time.Duration, 0, b.N)
	delivers := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		thread := fmt.Sprintf("idle-%d", i)
		_, _, err := bb.engine.UpsertThread(ctx, bb.pool, engine.ThreadUpsert{TenantID: bb.tenant, ThreadID: thread, Channel: "whatsapp", Contact: thread, DefaultWorkflowID: "echo"})
		benchNoError(b, err)
		b.StartTimer()
		arrived := time.Now()
		benchNoError(b, bb.engine.WithTx(ctx, func(tx pgx.Tx) error {
			_, err := bb.engine.ReceiveInboundTx(ctx, tx, engine.InboundParams{TenantID: bb.tenant, ThreadID: thread, Text: "hola", MessageID: thread})
			return err
		}))
		accepted := time.Now()
		var delivered time.Time
		for deadline := accepted.Add(30 * time.Second); ; {
			err := bb.pool.QueryRow(ctx, `SELECT m.delivered_at FROM thread_message m JOIN thread t ON t.id = m.thread_id
				WHERE t.tenant_id = $1 AND t.thread_id = $2 AND m.direction = 'out' AND m.status = 'delivered'`, bb.tenant, thread).Scan(&delivered)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("no reply on %s: %v", thread, err)
			}
			time.Sleep(500 * time.Microsecond)
		}
		replies = append(replies, time.Since(arrived))
		accepts = append(accepts, accepted.Sub(arrived))
		delivers = append(delivers, delivered.Sub(accepted))
	}
	b.StopTimer()
	reportPercentiles(b, "reply_", replies)
	reportPercentiles(b, "accept_", accepts)
	reportPercentiles(b, "deliver_", delivers)
}

// BenchmarkAdmissionWhenSlotFrees: main holds one run; a run holding the
// slot (in a gated tool call) and one pending behind it; the holder is let
// go. admit_* is the holder's terminal commit (completed_at) → the pending
// run's admission (started_at); done_* the same → the admitted run's end (it
// has a single step: start → end).
func BenchmarkAdmissionWhenSlotFrees(b *testing.B) {
	g := newGate()
	bb := benchSetupLanes(b, map[string]engine.ToolFunc{"gate": g.tool}, map[string]int{engine.LaneMain: 1})
	bb.define(b, `{"workflow_id": "holder", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "hold"},
	  {"id": "hold", "type": "task", "task": "gate", "inputs": {"key": "{{key}}"}, "next": "end"},
	  {"id": "end", "type": "end"}]}`)
	bb.define(b, `{"workflow_id": "next", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "end"},
	  {"id": "end", "type": "end"}]}`)
	ctx := context.Background()
	admits := make([]time.Duration, 0, b.N)
	dones := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		key := fmt.Sprintf("k%d", i)
		holder := bb.start(b, "holder", "", map[string]any{"key": key})
		select {
		case <-g.entered:
		case <-time.After(30 * time.Second):
			b.Fatal("the holder never reached its tool call")
		}
		next := bb.start(b, "next", "", nil)
		g.release(key)
		bb.waitCount(b, 1, 30*time.Second, `SELECT count(*) FROM agent_execution WHERE execution_id = $1 AND status = 'completed'`, next)
		var freed, admitted, done time.Time
		benchNoError(b, bb.pool.QueryRow(ctx, `SELECT h.completed_at, n.started_at, n.completed_at FROM agent_execution h, agent_execution n
			WHERE h.execution_id = $1 AND n.execution_id = $2`, holder, next).Scan(&freed, &admitted, &done))
		admits = append(admits, admitted.Sub(freed))
		dones = append(dones, done.Sub(freed))
	}
	b.StopTimer()
	reportPercentiles(b, "admit_", admits)
	reportPercentiles(b, "done_", dones)
}
