package console

import (
	"bytes"
	"encoding/json"
	"html/template"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine/workflow"
)

// deepJSON nests {"a": …} depth levels around 1.
func deepJSON(depth int) []byte {
	return []byte(strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth))
}

// decoded is raw JSON decoded as the engine decodes variables.
func decoded(t *testing.T, raw []byte) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(raw, &v))
	return v
}

// TestJSONTextIndentsAsEncodingJSONWithinBudget: a value within the budget
// reads exactly as json.Indent writes it, from raw JSON and from the
// decoded value alike, and nothing is noted as cut.
func TestJSONTextIndentsAsEncodingJSONWithinBudget(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		`{"b": [1, 2.5, {"c": null}, [], {}], "a": "x<y> \u00e9 \"q\" \\ \n", "e": true, "d": {"f": [[]]}}`,
		`[]`, `{}`, `"s"`, `12`, `null`, `[{"a": [{"b": {}}]}]`,
	} {
		var want bytes.Buffer
		require.NoError(t, json.Indent(&want, []byte(raw), "", "  "))
		got := jsonText([]byte(raw), pageJSON)
		require.Equal(t, want.String(), got.Text, raw)
		require.False(t, got.Cut(), raw)
		require.Equal(t, len(raw), got.Bytes)

		// Decoded, objects come back with their keys sorted, as
		// encoding/json marshals them.
		v := decoded(t, []byte(raw))
		var sorted bytes.Buffer
		enc := json.NewEncoder(&sorted)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		require.NoError(t, enc.Encode(v))
		got = valueText(v, pageJSON)
		require.Equal(t, strings.TrimSuffix(sorted.String(), "\n"), got.Text, raw)
		require.False(t, got.Cut(), raw)
	}
	require.Equal(t, "null", jsonText(nil, pageJSON).Text)
	require.Equal(t, "null", valueText(nil, pageJSON).Text)
}

// TestJSONTextCollapsesDepth: a value 9,990 levels deep shows
// maxJSONDepth levels, the rest as {…}, in a few KiB, and says it was
// collapsed; indenting it whole would write about 100 MB of spaces.
func TestJSONTextCollapsesDepth(t *testing.T) {
	t.Parallel()
	raw := deepJSON(9990)
	for name, got := range map[string]shownJSON{"raw": jsonText(raw, pageJSON), "decoded": valueText(decoded(t, raw), pageJSON)} {
		require.True(t, got.Cut(), name)
		require.False(t, got.Truncated, name)
		require.Equal(t, 1, got.Collapsed, name)
		require.Less(t, len(got.Text), 8<<10, name)
		// The outermost object and 31 inside it are open: 32 levels.
		require.True(t, strings.HasPrefix(got.Text, "{\n"), name)
		require.Equal(t, maxJSONDepth-1, strings.Count(got.Text, `"a": {`+"\n"), name)
		require.Contains(t, got.Text, `"a": {…}`, name)
		require.True(t, strings.HasSuffix(got.Text, "\n}"), name)
	}
}

// TestJSONTextCutsWidth: a wide value (a long array, a long string) is cut
// at the byte budget, at a rune boundary, and says so.
func TestJSONTextCutsWidth(t *testing.T) {
	t.Parallel()
	budget := jsonBudget{Bytes: 1000, Depth: maxJSONDepth}
	wide := []byte("[" + strings.Repeat(`"é", `, 100_000) + `"é"]`)
	long := []byte(`{"s": "` + strings.Repeat("ü", 500_000) + `"}`)
	for name, raw := range map[string][]byte{"array": wide, "string": long} {
		for how, got := range map[string]shownJSON{"raw": jsonText(raw, budget), "decoded": valueText(decoded(t, raw), budget)} {
			require.True(t, got.Truncated, name, how)
			require.True(t, got.Cut(), name, how)
			require.LessOrEqual(t, len(got.Text), budget.Bytes, name, how)
			require.Greater(t, len(got.Text), budget.Bytes-4, name, how)
			require.True(t, utf8.ValidString(got.Text), name, how)
		}
	}
	require.Equal(t, len(wide), jsonText(wide, budget).Bytes, "raw JSON knows its size")
}

// TestJSONTextOfInvalidInputIsBounded: what is not JSON is shown as it
// comes, within the budget, and never loops.
func TestJSONTextOfInvalidInputIsBounded(t *testing.T) {
	t.Parallel()
	budget := jsonBudget{Bytes: 256, Depth: 4}
	for _, raw := range []string{`}}}]]]`, `{"a": "unterminated`, `[[[[[[[[[[`, `nul`, strings.Repeat("x", 10_000), `{"a" 1 2 3}`} {
		got := jsonText([]byte(raw), budget)
		require.LessOrEqual(t, len(got.Text), budget.Bytes, raw)
	}
}

// TestCutNoteNamesTheAPI: the note under a cut value says what was left
// out and links the API URL that answers it whole; a value shown whole
// has no note.
func TestCutNoteNamesTheAPI(t *testing.T) {
	t.Parallel()
	pages, err := parsePages()
	require.NoError(t, err)
	note := func(s shownJSON) string {
		var b strings.Builder
		require.NoError(t, pages["execution"].ExecuteTemplate(&b, "cut", s))
		return b.String()
	}
	v := workflow.Variables{"deep": decoded(t, deepJSON(100)), "wide": strings.Repeat("w", 100<<10)}
	got := note(showJSON("variables", v, "/api/v1/workflow/executions/x-1"))
	require.Contains(t, got, `id="variables-cut"`)
	require.Contains(t, got, "the first 64 KiB of the value are shown")
	require.Contains(t, got, "1 object or array nests deeper than 32 levels, shown as {…} or […]")
	require.Contains(t, got, `<a href="/api/v1/workflow/executions/x-1"><code>GET /api/v1/workflow/executions/x-1</code></a>`)

	got = note(showJSON("source", json.RawMessage(deepJSON(40)), "/api/v1/workflow/definitions/w?version=1"))
	require.Contains(t, got, `id="source-cut"`)
	require.NotContains(t, got, "are shown", "nothing was cut for size")
	require.Contains(t, got, template.HTMLEscapeString("/api/v1/workflow/definitions/w?version=1"))

	require.Empty(t, note(showJSON("result", json.RawMessage(`{"ok": true}`), "/api/v1/workflow/executions/x-1")))
}

// TestClipText cuts a text at a rune boundary and counts what it left.
func TestClipText(t *testing.T) {
	t.Parallel()
	require.Equal(t, shownText{Text: "hola"}, clipText("hola", 4))
	got := clipText(strings.Repeat("é", 10), 5) // 2 bytes a rune
	require.Equal(t, shownText{Text: "éé", More: 16}, got)
}
