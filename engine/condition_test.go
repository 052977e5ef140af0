package engine

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestConditions(t *testing.T) {
	t.Parallel()
	vars := Variables{"document": map[string]any{"language": "es"}, "score": 7.0, "timedOut": false, "tags": []any{"a", "b"}}
	cases := []struct {
		source string
		want   any
	}{
		{"${document.language} == 'es'", true},
		{"document.language == 'en'", false},
		{"${customer.tier} == 'gold' && score > 5", false},
		{"customer.tier == nil", true},
		{"score > 5 && timedOut != true", true},
		{"missing", nil},
		{"len(tags) == 2", true},
		{"document.language", "es"},
	}
	for _, tc := range cases {
		c, err := compileCondition(tc.source)
		require.NoError(t, err, tc.source)
		got, err := c.eval(vars)
		require.NoError(t, err, tc.source)
		require.Equal(t, tc.want, got, tc.source)
	}
	_, err := compileCondition("${document.language} === ")
	require.Error(t, err)
}

func TestTemplates(t *testing.T) {
	t.Parallel()
	vars := Variables{"name": "Ana", "docs": []any{"INE", "CURP"}, "n": 3.0, "obj": map[string]any{"a": 1.0}}
	in := &interpolation{vars: vars}
	require.Equal(t, "Hola Ana, necesito INE, CURP (3)", in.text("Hola {{name}}, necesito ${docs} ({{ n }})"))
	require.Equal(t, `obj={"a":1}`, in.text("obj={{obj}}"))
	require.Equal(t, []any{"INE", "CURP"}, in.value("{{docs}}"))
	require.Equal(t, 3.0, in.value("${n}"))
	require.Equal(t, "x=", in.text("x={{nope}}"))
	require.Equal(t, []string{"nope"}, in.missing)
}
