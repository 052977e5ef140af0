package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/internal/benchkit"
)

// TestStartGuessWrong: a start of a workflow's latest version guesses the
// version this process read last (Engine.startDefinition). Another process
// stores newer versions: each start still runs the latest one, whether the
// new version plans the same reservation (kept), another one (taken again)
// or none (its first step waits), and a dropped reservation writes nothing.
func TestStartGuessWrong(t *testing.T) {
	ctx := context.Background()
	b := setup(t, setupOpts{})
	other, err := engine.New(engine.Config{Pool: b.pool, Channel: &engine.MemoryChannel{}})
	require.NoError(t, err)
	store := func(def string) {
		t.Helper()
		_, _, err := other.DefineWorkflow(ctx, b.pool, b.tenant, []byte(def))
		require.NoError(t, err)
	}
	version := func(v string) string {
		return strings.Replace(benchkit.FiveNodeWorkflow, `"version": "1.0.0"`, `"version": "`+v+`"`, 1)
	}
	b.define(t, benchkit.FiveNodeWorkflow)
	starts := []struct {
		stored string // stored by the other process before the start; empty: none
		want   string // the version the run must run
		status engine.ExecutionStatus
	}{
		{"", "1.0.0", engine.StatusCompleted}, // reads the latest version
		{"", "1.0.0", engine.StatusCompleted}, // guesses it, right
		// Same plan: the reservation stands.
		{version("2.0.0"), "2.0.0", engine.StatusCompleted},
		// No send node: no message id is drawn, so the reservation is
		// taken again.
		{`{"workflow_id": "bench", "version": "3.0.0", "nodes": [
		  {"id": "start", "type": "start", "next": "end"}, {"id": "end", "type": "end"}]}`, "3.0.0", engine.StatusCompleted},
		// The first step waits: no reservation at all.
		{`{"workflow_id": "bench", "version": "4.0.0", "nodes": [
		  {"id": "start", "type": "start", "next": "wait"},
		  {"id": "wait", "type": "action", "actionType": "wait_for_event", "parameters": {"event_id": "go", "timeout": "1h"}, "next": "end"},
		  {"id": "end", "type": "end"}]}`, "4.0.0", engine.StatusWaiting},
	}
	for i, s := range starts {
		if s.stored != "" {
			store(s.stored)
		}
		x := b.start(t, engine.StartParams{WorkflowID: "bench", Input: benchkit.FiveNodeInput()})
		require.Equal(t, s.want, x.Version, "start %d", i)
		require.Equal(t, s.status, x.Status, "start %d", i)
	}
	require.Equal(t, len(starts), countRows(t, b.pool, `SELECT count(*) FROM agent_execution WHERE tenant_id = $1`, b.tenant))
	require.Equal(t, len(starts), countRows(t, b.pool, `SELECT count(*) FROM thread WHERE tenant_id = $1`, b.tenant))
	require.Equal(t, len(starts), countRows(t, b.pool, `SELECT count(*) FROM execution_event WHERE tenant_id = $1 AND action = 'workflow.started'`, b.tenant))
}

// TestStartGuessIsPerTenant: once one tenant's starts have taught the
// process its workflow's latest version, another tenant starting a
// workflow of the same id that it never stored gets not found, and writes
// nothing. Guesses are kept by tenant, and the reservation's check reads
// the starting tenant's versions only, so either alone holds this.
func TestStartGuessIsPerTenant(t *testing.T) {
	ctx := context.Background()
	b := setup(t, setupOpts{})
	b.define(t, benchkit.FiveNodeWorkflow)
	for range 2 {
		x := b.start(t, engine.StartParams{WorkflowID: "bench", Input: benchkit.FiveNodeInput()})
		require.Equal(t, engine.StatusCompleted, x.Status)
	}
	other := b.tenant + "-other"
	err := b.engine.WithTx(ctx, func(tx pgx.Tx) error {
		_, err := b.engine.StartExecution(ctx, tx, engine.StartParams{TenantID: other, WorkflowID: "bench", Input: benchkit.FiveNodeInput()})
		return err
	})
	require.ErrorIs(t, err, engine.ErrNotFound)
	require.Zero(t, countRows(t, b.pool, `SELECT count(*) FROM agent_execution WHERE tenant_id = $1`, other))
	require.Zero(t, countRows(t, b.pool, `SELECT count(*) FROM thread WHERE tenant_id = $1`, other))
}
