package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/jobs"
)

// A version stored in a transaction that rolls back (a lost COMMIT, a later
// error) is not cached: the same version stored again with other content is
// the one executions run.
func TestRolledBackDefinitionIsNotCached(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	flow := func(text string) string {
		return `{"workflow_id": "w", "version": "1", "nodes": [
		  {"id": "start", "type": "start", "next": "say"},
		  {"id": "say", "type": "action", "actionType": "send_message", "parameters": {"message": "` + text + `"}, "next": "end"},
		  {"id": "end", "type": "end"}]}`
	}
	rollback := errors.New("roll back")
	err := b.engine.WithTx(context.Background(), func(tx pgx.Tx) error {
		_, _, err := b.engine.DefineWorkflow(context.Background(), tx, b.tenant, []byte(flow("rolled back")))
		require.NoError(t, err)
		return rollback
	})
	require.ErrorIs(t, err, rollback)
	// Another process stores the version for good and starts a run of it,
	// whose steps this process's workers run.
	other, err := engine.New(engine.Config{Pool: b.pool, DeferFirstStep: true})
	require.NoError(t, err)
	_, err = jobs.NewClient(b.pool, jobs.Config{Engine: other, InsertOnly: true})
	require.NoError(t, err)
	_, _, err = other.DefineWorkflow(context.Background(), b.pool, b.tenant, []byte(flow("stored")))
	require.NoError(t, err)
	err = other.WithTx(context.Background(), func(tx pgx.Tx) error {
		_, err := other.StartExecution(context.Background(), tx, engine.StartParams{TenantID: b.tenant, WorkflowID: "w", ExecutionID: "x", ThreadID: "th"})
		return err
	})
	require.NoError(t, err)
	require.Equal(t, []string{"stored"}, b.waitDelivered(t, "th", 1))
}
