package console_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStaticServesFilesAndListsNoDirectory: the console's script and
// style are served; the directory that holds them is not found, and no
// answer lists its files.
func TestStaticServesFilesAndListsNoDirectory(t *testing.T) {
	t.Parallel()
	s := newSite(t, siteOpts{})
	b := s.browser(t)
	for _, path := range []string{"/console/static/console.js", "/console/static/console.css"} {
		require.Equal(t, http.StatusOK, b.get(path).status, path)
	}
	for _, path := range []string{"/console/static/", "/console/static/nope/", "/console/static/nope.js"} {
		p := b.get(path)
		require.Equal(t, http.StatusNotFound, p.status, path)
		require.False(t, strings.Contains(p.body, "console.js"), "%s lists the directory", path)
	}
}
