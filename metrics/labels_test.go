package metrics

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLabelCapKeepsTheFirstValues(t *testing.T) {
	t.Parallel()
	c := newLabelCap(3)
	for i := range 10 {
		want := fmt.Sprint(i)
		if i >= 3 {
			want = Other
		}
		require.Equal(t, want, c.value(fmt.Sprint(i)))
	}
	require.Equal(t, "1", c.value("1"), "a kept value stays kept")
}

func TestStepLabelsBoundSeries(t *testing.T) {
	t.Parallel()
	s := newStepLabels(5)
	series := map[[2]string]bool{}
	for w := range 50 {
		for n := range 50 {
			wf, step := s.values(fmt.Sprintf("wf%d", w), fmt.Sprintf("n%d", n))
			series[[2]string{wf, step}] = true
		}
	}
	require.LessOrEqual(t, len(series), 2*5+1)
	require.True(t, series[[2]string{"wf0", "n4"}], "the first pairs keep their names")
	require.True(t, series[[2]string{"wf0", Other}], "a kept workflow's later steps keep its id")
	require.True(t, series[[2]string{Other, Other}])
}

func TestLaneLabel(t *testing.T) {
	t.Parallel()
	for lane, want := range map[string]string{"main": "main", "subagent": "subagent", "cron": "cron",
		"acme-merger-2027": Other, "session:t1": Other, "": Other} {
		require.Equal(t, want, laneLabel(lane), lane)
	}
}
