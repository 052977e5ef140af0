package browsertest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFindChromium sets the environment, so it cannot run in parallel.
func TestFindChromium(t *testing.T) {
	t.Run("named by the environment", func(t *testing.T) {
		t.Setenv(EnvChromium, "sh")
		path, err := findChromium()
		require.NoError(t, err)
		require.FileExists(t, path)
	})
	t.Run("named by the environment but missing", func(t *testing.T) {
		t.Setenv(EnvChromium, "/nonexistent/chromium")
		_, err := findChromium()
		require.ErrorContains(t, err, EnvChromium+"=/nonexistent/chromium")
		require.NotErrorIs(t, err, errNoChromium) // a test then fails, never skips
	})
	t.Run("none on PATH", func(t *testing.T) {
		t.Setenv(EnvChromium, "")
		t.Setenv("PATH", t.TempDir())
		_, err := findChromium()
		require.ErrorIs(t, err, errNoChromium)
	})
}
