package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/engine/workflow"
)

// StoredDefinition is a definition as stored for a tenant.
type StoredDefinition struct {
	*workflow.Definition
	// ID is the row id.
	ID int64
	// TenantID owns the definition.
	TenantID string
	// Raw is the definition's JSON as stored.
	Raw json.RawMessage
	// CreatedAt is when this version was stored.
	CreatedAt time.Time
}

// ValidateDefinition parses and validates a definition payload. A payload
// over limits.definitionBytes is refused before it is parsed.
func (e *Engine) ValidateDefinition(raw []byte) (*workflow.Definition, error) {
	if max := e.cfg.Limits.DefinitionBytes; len(raw) > max {
		return nil, &workflow.ValidationError{Problems: []workflow.Problem{{Field: "payload",
			Message: fmt.Sprintf("the definition is %d bytes, over the limit of %d (limits.definitionBytes)", len(raw), max)}}}
	}
	def, err := workflow.ParseDefinition(raw)
	if err != nil {
		return nil, err
	}
	if err := def.Validate(e.tools, e.cfg.Limits); err != nil {
		return nil, err
	}
	return def, nil
}

// DefineWorkflow validates and stores a definition version. Storing the same
// content again is a no-op that returns the stored version; a version that
// exists with other content is a *ConflictError.
func (e *Engine) DefineWorkflow(ctx context.Context, db dbsqlc.DBTX, tenantID string, raw []byte) (*StoredDefinition, bool, error) {
	def, err := e.ValidateDefinition(raw)
	if err != nil {
		return nil, false, err
	}
	canonical := mustJSON(def)
	var lane *string
	if def.Lane != "" {
		lane = &def.Lane
	}
	row, err := e.q.DefinitionInsert(ctx, db, &dbsqlc.DefinitionInsertParams{
		TenantID: tenantID, WorkflowID: def.WorkflowID, Version: def.Version,
		Name: def.Name, Lane: lane, Definition: canonical,
	})
	if err == nil {
		// Cached once committed: a version whose transaction rolls back
		// must not be found here (another content may be stored under it).
		stored, err := e.parseStored(row)
		if err != nil {
			return nil, false, err
		}
		if tx, ok := db.(pgx.Tx); ok {
			afterCommit(tx, func() { e.definitions.add(stored) })
		} else {
			e.definitions.add(stored)
		}
		return stored, true, nil
	}
	if err = notFound(err); !errors.Is(err, ErrNotFound) {
		return nil, false, fmt.Errorf("storing definition: %w", err)
	}
	existing, err := e.q.DefinitionGetByVersion(ctx, db, &dbsqlc.DefinitionGetByVersionParams{
		TenantID: tenantID, WorkflowID: def.WorkflowID, Version: def.Version,
	})
	if err != nil {
		return nil, false, fmt.Errorf("reading stored definition: %w", notFound(err))
	}
	if !jsonEqual(existing.Definition, canonical) {
		return nil, false, &ConflictError{
			Code:    "workflow.define.version_conflict",
			Message: fmt.Sprintf("workflow %s version %s is already stored with other content; definitions are immutable, store a new version", def.WorkflowID, def.Version),
		}
	}
	stored, err := e.storedDefinition(existing)
	return stored, false, err
}

// GetDefinition returns a version of a workflow, or its latest when version
// is empty.
// A stored version never changes (DefineWorkflow refuses a different
// definition under a stored version), so a cached one is as good as its row;
// the latest version costs an index-only lookup of its row id.
func (e *Engine) GetDefinition(ctx context.Context, db dbsqlc.DBTX, tenantID, workflowID, version string) (*StoredDefinition, error) {
	if version != "" {
		if d, ok := e.definitions.byVersion(tenantID, workflowID, version); ok {
			return d, nil
		}
		row, err := e.q.DefinitionGetByVersion(ctx, db, &dbsqlc.DefinitionGetByVersionParams{TenantID: tenantID, WorkflowID: workflowID, Version: version})
		if err != nil {
			return nil, notFound(err)
		}
		return e.storedDefinition(row)
	}
	id, err := e.q.DefinitionLatestID(ctx, db, &dbsqlc.DefinitionLatestIDParams{TenantID: tenantID, WorkflowID: workflowID})
	if err != nil {
		return nil, notFound(err)
	}
	d, ok := e.definitions.byRowID(id)
	if !ok {
		row, err := e.q.DefinitionGetByID(ctx, db, id)
		if err != nil {
			return nil, notFound(err)
		}
		if d, err = e.storedDefinition(row); err != nil {
			return nil, err
		}
	}
	e.definitions.sawLatest(d)
	return d, nil
}

// ListDefinitions returns the latest version of each workflow, ordered by
// workflow_id, after the given workflow_id.
func (e *Engine) ListDefinitions(ctx context.Context, db dbsqlc.DBTX, tenantID, after string, limit int) ([]*StoredDefinition, error) {
	rows, err := e.q.DefinitionListLatest(ctx, db, &dbsqlc.DefinitionListLatestParams{TenantID: tenantID, AfterWorkflowID: after, Max: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("listing definitions: %w", err)
	}
	out := make([]*StoredDefinition, 0, len(rows))
	for _, r := range rows {
		d, err := e.storedDefinition(r)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// definitionByKey returns a version of a tenant's workflow, from the cache
// when it is there.
func (e *Engine) definitionByKey(ctx context.Context, db dbsqlc.DBTX, tenantID, workflowID, version string) (*workflow.Definition, error) {
	if d, ok := e.definitions.byVersion(tenantID, workflowID, version); ok {
		return d.Definition, nil
	}
	stored, err := e.GetDefinition(ctx, db, tenantID, workflowID, version)
	if err != nil {
		return nil, fmt.Errorf("loading definition %s@%s: %w", workflowID, version, err)
	}
	return stored.Definition, nil
}

// storedDefinition parses a stored definition's row, or takes it from the
// cache, and keeps it there.
func (e *Engine) storedDefinition(row *dbsqlc.WorkflowDefinition) (*StoredDefinition, error) {
	if d, ok := e.definitions.byRowID(row.ID); ok {
		return d, nil
	}
	stored, err := e.parseStored(row)
	if err != nil {
		return nil, err
	}
	e.definitions.add(stored)
	return stored, nil
}

// parseStored parses a stored definition's row.
func (e *Engine) parseStored(row *dbsqlc.WorkflowDefinition) (*StoredDefinition, error) {
	def, err := workflow.ParseDefinition(row.Definition)
	if err != nil {
		return nil, fmt.Errorf("parsing stored definition %d: %w", row.ID, err)
	}
	// Stored definitions were valid when stored; a tool registered then may
	// be gone now, which the task reports when it runs.
	_ = def.Validate(e.tools, e.cfg.Limits)
	def.Index()
	return &StoredDefinition{Definition: def, ID: row.ID, TenantID: row.TenantID, Raw: row.Definition, CreatedAt: row.CreatedAt}, nil
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(mustJSON(x), mustJSON(y))
}
