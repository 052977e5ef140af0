package httpapi

import (
	"context"
	"net/http"

	"github.com/batonrun/baton/db/dbsqlc"
)

func (s *Server) defineWorkflow(ctx context.Context, r *request, db dbsqlc.DBTX) (int, any, error) {
	def, _, err := s.engine.DefineWorkflow(ctx, db, r.principal.tenantID, r.envelope.Payload)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, renderDefinition(def), nil
}

func (s *Server) validateWorkflow(_ context.Context, r *request, _ dbsqlc.DBTX) (int, any, error) {
	if _, err := s.engine.ValidateDefinition(r.envelope.Payload); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]bool{"valid": true}, nil
}

func (s *Server) listDefinitions(ctx context.Context, r *request, db dbsqlc.DBTX) (int, any, error) {
	limit, cursor, err := pageParams(r, "workflow", "list")
	if err != nil {
		return 0, nil, err
	}
	defs, err := s.engine.ListDefinitions(ctx, db, r.principal.tenantID, cursor, limit+1)
	if err != nil {
		return 0, nil, err
	}
	out := listView[definitionView]{Items: []definitionView{}}
	for i, d := range defs {
		if i == limit {
			out.NextCursor = encodeCursor(defs[i-1].WorkflowID)
			break
		}
		out.Items = append(out.Items, renderDefinition(d))
	}
	return http.StatusOK, out, nil
}

func (s *Server) getDefinition(ctx context.Context, r *request, db dbsqlc.DBTX) (int, any, error) {
	version := r.URL.Query().Get("version")
	if err := s.checkIDs("workflow", "get", idField{"version", version}); err != nil {
		return 0, nil, err
	}
	def, err := s.engine.GetDefinition(ctx, db, r.principal.tenantID, r.PathValue("workflow_id"), version)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, renderDefinition(def), nil
}
