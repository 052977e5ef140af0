package workflow

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestConditions(t *testing.T) {
	t.Parallel()
	vars := Variables{
		"document": map[string]any{"language": "es"}, "score": 7.0, "timedOut": false, "tags": []any{"a", "b"},
		"items": []any{map[string]any{"x": "first"}}, "count": 3.0, "type": "pdf", "max": 10.0, "in": "yes",
	}
	cases := []struct {
		source string
		want   any
	}{
		{"${document.language} == 'es'", true},
		{"document.language == 'en'", false},
		{"${customer.tier} == 'gold' && score > 5", false},
		{"${customer.tier} == null", true},
		{"${customer.tier} == nil", true},
		{"score > 5 && timedOut != true", true},
		{"missing", nil},
		{"len(tags) == 2", true},
		{"size(${tags}) == 2", true},
		{"document.language", "es"},
		// Paths with list indexes, and names CEL or other languages reserve.
		{"${items.0.x} == 'first'", true},
		{"${items.5.x} == null", true},
		{"${count} > 2", true},
		{"${type} == 'pdf'", true},
		{"${max} >= 10", true},
		{"${in} == 'yes'", true},
		{"${score} * 1.5", 10.5},
		{"${tags}.exists(t, t == 'b')", true},
	}
	for _, tc := range cases {
		c, err := compileCondition(tc.source, DefaultLimits())
		require.NoError(t, err, tc.source)
		got, err := c.eval(context.Background(), vars)
		require.NoError(t, err, tc.source)
		require.Equal(t, tc.want, got, tc.source)
	}
	_, err := compileCondition("${document.language} === ", DefaultLimits())
	require.Error(t, err)
}

func TestTemplates(t *testing.T) {
	t.Parallel()
	vars := Variables{"name": "Ana", "docs": []any{"INE", "CURP"}, "n": 3.0, "obj": map[string]any{"a": 1.0}}
	in := NewInterpolation(vars, 1<<20)
	require.Equal(t, "Hola Ana, necesito INE, CURP (3)", in.Text("Hola {{name}}, necesito ${docs} ({{ n }})"))
	require.Equal(t, `obj={"a":1}`, in.Text("obj={{obj}}"))
	require.Equal(t, []any{"INE", "CURP"}, in.Value("{{docs}}"))
	require.Equal(t, 3.0, in.Value("${n}"))
	require.Equal(t, "x=", in.Text("x={{nope}}"))
	require.Equal(t, []string{"nope"}, in.Missing)
	require.NoError(t, in.Err())
}
