package workflow

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every limit has a default, so that no limit is 0 (refusing everything)
// when the configuration leaves it out, and a zero field takes it.
func TestEveryLimitHasADefault(t *testing.T) {
	t.Parallel()
	d := reflect.ValueOf(DefaultLimits())
	for i := range d.NumField() {
		require.False(t, d.Field(i).IsZero(), "limits.%s has no default", d.Type().Field(i).Tag.Get("json"))
	}
	require.Equal(t, DefaultLimits(), Limits{}.WithDefaults())
	require.Equal(t, 10, Limits{}.WithDefaults().ChildDepth)
	require.Equal(t, 7, Limits{ChildDepth: 7}.WithDefaults().ChildDepth)
	require.NoError(t, DefaultLimits().Check())
	err := Limits{Nodes: -1, WaitTimeoutMS: -5}.Check()
	require.ErrorContains(t, err, "limits.nodes must not be negative")
	require.ErrorContains(t, err, "limits.waitTimeoutMs must not be negative")
}
