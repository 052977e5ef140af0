package httpapi_test

import (
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/httpapi"
	"github.com/batonrun/baton/internal/openapitest"
)

// apiTableRow is an endpoint row of docs/api.md:
// | METHOD `/path[?query]` | domain.action (or —) | what it does |
var apiTableRow = regexp.MustCompile("^\\| (GET|POST|PUT|DELETE|PATCH) `(/[^`]*)` \\| ([^|]*) \\|")

// docOperations reads the endpoint tables of docs/api.md: "METHOD path" to
// domain.action ("" for —). A table whose header starts with "method path"
// lists paths under /api/v1, unless the header says "from the root".
func docOperations(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile("../docs/api.md")
	require.NoError(t, err)
	ops := map[string]string{}
	base, inTable := "", false
	for i, line := range strings.Split(string(raw), "\n") {
		switch {
		case strings.HasPrefix(line, "| method path"):
			inTable, base = true, "/api/v1"
			if strings.Contains(line, "from the root") {
				base = ""
			}
		case inTable && strings.HasPrefix(line, "|---"):
		case inTable && strings.HasPrefix(line, "|"):
			m := apiTableRow.FindStringSubmatch(line)
			require.NotNil(t, m, "docs/api.md:%d is not a \"| METHOD `/path` | domain.action | … |\" row: %s", i+1, line)
			path := m[2]
			if k := strings.IndexAny(path, "?["); k >= 0 {
				path = path[:k]
			}
			key := m[1] + " " + base + path
			require.NotContains(t, ops, key, "docs/api.md:%d lists %s again", i+1, key)
			action := strings.TrimSpace(m[3])
			if action == "—" {
				action = ""
			}
			ops[key] = action
		default:
			inTable = false
		}
	}
	require.NotEmpty(t, ops, "docs/api.md has no endpoint table")
	return ops
}

// specOperations lists the operations of the served OpenAPI document:
// "METHOD path" to its x-domain-action ("" when it has none).
func specOperations(t *testing.T) map[string]string {
	t.Helper()
	ops := map[string]string{}
	for path, item := range openapitest.New(t, httpapi.OpenAPIDocument).Doc.Paths.Map() {
		for method, op := range item.Operations() {
			action, _ := op.Extensions["x-domain-action"].(string)
			ops[method+" "+path] = action
		}
	}
	return ops
}

// TestAPIDocMatchesOpenAPI: docs/api.md's endpoint tables and
// openapi.yaml list the same operations, with the same domain.action.
func TestAPIDocMatchesOpenAPI(t *testing.T) {
	t.Parallel()
	doc, spec := docOperations(t), specOperations(t)
	var problems []string
	for op, action := range spec {
		docAction, listed := doc[op]
		switch {
		case !listed:
			problems = append(problems, op+" is in openapi.yaml but not in docs/api.md")
		case docAction != action:
			problems = append(problems, op+": docs/api.md says "+show(docAction)+", openapi.yaml's x-domain-action "+show(action))
		}
	}
	for op := range doc {
		if _, ok := spec[op]; !ok {
			problems = append(problems, op+" is in docs/api.md but not in openapi.yaml")
		}
	}
	slices.Sort(problems)
	require.Empty(t, problems)
}

func show(action string) string {
	if action == "" {
		return "none"
	}
	return action
}

var pathParam = regexp.MustCompile(`\{[^}]+\}`)

// TestDomainActionsMatchTheServer: the server takes each operation's
// x-domain-action in X-Domain-Action (and goes on to ask for a token) and
// refuses any other value naming its own domain.action, so the document
// names what the server does.
func TestDomainActionsMatchTheServer(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	for op, action := range specOperations(t) {
		if action == "" {
			continue
		}
		method, path, _ := strings.Cut(op, " ")
		path = pathParam.ReplaceAllString(path, "contract-1")
		r := b.do(t, call{method: method, path: path, token: ptr(""), headers: map[string]string{"X-Domain-Action": action}})
		require.Equal(t, http.StatusUnauthorized, r.status, "%s: %s", op, r.raw)
		domain, _, _ := strings.Cut(action, ".")
		require.Equal(t, domain, r.body["type"].(map[string]any)["domain"], op)

		r = b.do(t, call{method: method, path: path, token: ptr(""), headers: map[string]string{"X-Domain-Action": "other.action"}})
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", op, r.raw)
		require.Equal(t, action+".invalid_request", r.errorCode(), op)
	}
}
