package console

import (
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"time"

	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/engine/workflow"
	"github.com/batonrun/baton/httpapi"
)

// Bounds of the definition pages.
const (
	definitionsPerPage = 200
	versionsShown      = 50
)

// definitionsView is what templates/definitions.html shows.
type definitionsView struct {
	Definitions []definitionRow
	// Validated is the validate box's outcome, when the page answers one.
	Validated *validation
}

// definitionRow is the latest version of one workflow.
type definitionRow struct {
	WorkflowID, Name, Version, Lane string
	Nodes                           int
	CreatedAt                       time.Time
}

// validation is what the validate box found.
type validation struct {
	Source   string
	Problems []workflow.Problem
	Graph    template.HTML
}

// definitionsPage lists the latest version of each workflow and offers the
// validate box.
func (c *Console) definitionsPage(w http.ResponseWriter, r *http.Request, sess httpapi.Session) error {
	return c.showDefinitions(w, r, sess, nil)
}

func (c *Console) showDefinitions(w http.ResponseWriter, r *http.Request, sess httpapi.Session, v *validation) error {
	defs, err := c.engine.ListDefinitions(r.Context(), c.pool, sess.TenantID, "", definitionsPerPage)
	if err != nil {
		return err
	}
	view := definitionsView{Validated: v}
	for _, d := range defs {
		view.Definitions = append(view.Definitions, definitionRow{WorkflowID: d.WorkflowID, Name: d.Name, Version: d.Version,
			Lane: d.Lane, Nodes: len(d.Nodes), CreatedAt: d.CreatedAt})
	}
	return c.show(w, sess, page{Name: "definitions", Stream: "none", Data: view})
}

// validatePage validates the posted definition and shows its graph with
// the problem nodes marked. It stores nothing.
func (c *Console) validatePage(w http.ResponseWriter, r *http.Request, sess httpapi.Session) error {
	src := r.PostFormValue("definition")
	v := &validation{Source: src}
	_, err := c.engine.ValidateDefinition([]byte(src))
	var ve *workflow.ValidationError
	switch {
	case err == nil:
	case errors.As(err, &ve):
		v.Problems = ve.Problems
	default:
		v.Problems = []workflow.Problem{{Field: "definition", Message: err.Error()}}
	}
	// Draw what parses, even when it does not validate: a lenient read
	// that ignores unknown fields.
	var loose struct {
		Nodes []*workflow.Node `json:"nodes"`
	}
	if json.Unmarshal([]byte(src), &loose) == nil && len(loose.Nodes) > 0 && c.drawable(loose.Nodes) {
		v.Graph = RenderGraph(loose.Nodes, GraphMarks{Problems: GraphProblems(v.Problems)})
	}
	return c.showDefinitions(w, r, sess, v)
}

// drawable reports whether a posted definition is small enough to draw:
// no more nodes than limits.nodes and no more edges than four a node. A
// hostile definition that fails validation is listed, not drawn.
func (c *Console) drawable(nodes []*workflow.Node) bool {
	limit := c.engine.Limits().Nodes
	if len(nodes) > limit {
		return false
	}
	edges := 0
	for _, n := range nodes {
		if n != nil {
			edges += len(n.Branches) + 1
		}
	}
	return edges <= 4*limit
}

// definitionView is what templates/definition.html shows.
type definitionView struct {
	WorkflowID, Name, Version, Description, Lane string
	Versions                                     []*dbsqlc.ConsoleDefinitionVersionsRow
	Graph                                        template.HTML
	Source                                       json.RawMessage
}

// definitionPage shows one version of a workflow (the latest unless
// ?version= names one): its graph, its versions and its source.
func (c *Console) definitionPage(w http.ResponseWriter, r *http.Request, sess httpapi.Session) error {
	ctx := r.Context()
	d, err := c.engine.GetDefinition(ctx, c.pool, sess.TenantID, r.PathValue("id"), r.URL.Query().Get("version"))
	if err != nil {
		return err
	}
	versions, err := dbsqlc.New().ConsoleDefinitionVersions(ctx, c.pool, &dbsqlc.ConsoleDefinitionVersionsParams{
		TenantID: sess.TenantID, WorkflowID: d.WorkflowID, Max: versionsShown})
	if err != nil {
		return err
	}
	view := definitionView{WorkflowID: d.WorkflowID, Name: d.Name, Version: d.Version, Description: d.Description, Lane: d.Lane,
		Versions: versions, Graph: RenderGraph(d.Nodes, GraphMarks{}), Source: d.Raw}
	return c.show(w, sess, page{Name: "definition", Title: "Workflow " + d.WorkflowID, Stream: "none", Data: view})
}
