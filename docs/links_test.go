// Package docs_test checks the repository's Markdown: that every relative
// link and every section a text names by its title leads somewhere, so
// that moving a section out of one document breaks a test rather than a
// reader's way through the docs.
package docs_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/text"
)

// repoRoot is the repository, seen from this package's directory.
const repoRoot = ".."

// document is one Markdown file of the repository, parsed.
type document struct {
	// path is the file's path from the repository's root, with slashes.
	path   string
	source []byte
	root   ast.Node
}

// link is a relative link or image of a document.
type link struct {
	dest string // as written
	line int
}

// parse reads and parses the Markdown file at path (from the repository's
// root).
func parse(t *testing.T, p string) *document {
	t.Helper()
	source, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(p)))
	require.NoError(t, err)
	return &document{path: p, source: source, root: goldmark.New().Parser().Parse(text.NewReader(source))}
}

// markdownFiles returns the repository's Markdown files, by path from its
// root, leaving out hidden directories.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != repoRoot && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(repoRoot, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	require.NoError(t, err)
	return files
}

// lineOf returns the line number of a byte offset of source.
func lineOf(source []byte, offset int) int {
	return bytes.Count(source[:offset], []byte("\n")) + 1
}

// relativeLinks returns the document's links and images that lead inside
// the repository: those with neither a scheme nor a host.
func (d *document) relativeLinks() []link {
	var links []link
	_ = ast.Walk(d.root, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		var dest []byte
		switch n := n.(type) {
		case *ast.Link:
			dest = n.Destination
		case *ast.Image:
			dest = n.Destination
		default:
			return ast.WalkContinue, nil
		}
		u, err := url.Parse(string(dest))
		if err == nil && (u.Scheme != "" || u.Host != "") {
			return ast.WalkContinue, nil
		}
		links = append(links, link{dest: string(dest), line: d.lineOfNode(n)})
		return ast.WalkContinue, nil
	})
	return links
}

// lineOfNode returns the line of the first text inside n, or 0.
func (d *document) lineOfNode(n ast.Node) int {
	line := 0
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if t, ok := c.(*ast.Text); ok && entering {
			line = lineOf(d.source, t.Segment.Start)
			return ast.WalkStop, nil
		}
		return ast.WalkContinue, nil
	})
	return line
}

// plainText is the text of n as GitHub shows it: its text, that of its code
// spans, links and emphasis, without the markup.
func (d *document) plainText(n ast.Node) string {
	var b strings.Builder
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch c := c.(type) {
		case *ast.Text:
			b.Write(c.Segment.Value(d.source))
			if c.SoftLineBreak() || c.HardLineBreak() {
				b.WriteByte(' ')
			}
		case *ast.String:
			b.Write(c.Value)
		}
		return ast.WalkContinue, nil
	})
	return b.String()
}

// anchors returns the anchors GitHub gives the document's headings.
func (d *document) anchors() map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	_ = ast.Walk(d.root, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if h, ok := n.(*ast.Heading); ok && entering {
			slug := slugify(d.plainText(h))
			if k := seen[slug]; k > 0 {
				anchors[fmt.Sprintf("%s-%d", slug, k)] = true
			} else {
				anchors[slug] = true
			}
			seen[slug]++
			return ast.WalkSkipChildren, nil
		}
		return ast.WalkContinue, nil
	})
	return anchors
}

// slugify makes a heading's anchor as GitHub does: lower case, every
// character but letters, marks, digits, underscores, spaces and hyphens
// dropped, and each space made a hyphen. A heading that repeats an earlier
// one's anchor gets -1, -2 and so on after it.
func slugify(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// sections returns the titles a text may name a part of the document by:
// its headings, and the beginnings of its paragraphs, which is where a list
// item or a paragraph gives its label ("Shared admission: …").
func (d *document) sections() []string {
	var titles []string
	_ = ast.Walk(d.root, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		switch n.(type) {
		case *ast.Heading, *ast.Paragraph, *ast.TextBlock:
			if entering {
				titles = append(titles, strings.Join(strings.Fields(d.plainText(n)), " "))
			}
			return ast.WalkSkipChildren, nil
		}
		return ast.WalkContinue, nil
	})
	return titles
}

// Every relative link and image of the repository's Markdown leads to a
// file or directory that exists, and a link's #fragment to a heading of
// the document it names.
func TestRelativeLinksResolve(t *testing.T) {
	t.Parallel()
	docs := map[string]*document{}
	load := func(p string) *document {
		if docs[p] == nil {
			docs[p] = parse(t, p)
		}
		return docs[p]
	}
	files := markdownFiles(t)
	require.Contains(t, files, "README.md")
	var broken []string
	for _, p := range files {
		d := load(p)
		for _, l := range d.relativeLinks() {
			target, fragment, _ := strings.Cut(l.dest, "#")
			target, err := url.PathUnescape(target)
			if err != nil {
				broken = append(broken, fmt.Sprintf("%s:%d: %s: %v", p, l.line, l.dest, err))
				continue
			}
			resolved := p
			if target != "" {
				resolved = path.Join(path.Dir(p), target)
			}
			if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(resolved))); err != nil {
				broken = append(broken, fmt.Sprintf("%s:%d: %s: no such file or directory %s", p, l.line, l.dest, resolved))
				continue
			}
			if fragment == "" {
				continue
			}
			if !strings.HasSuffix(resolved, ".md") {
				broken = append(broken, fmt.Sprintf("%s:%d: %s: a #fragment of a file that is not Markdown", p, l.line, l.dest))
				continue
			}
			if !load(resolved).anchors()[fragment] {
				broken = append(broken, fmt.Sprintf("%s:%d: %s: %s has no heading whose anchor is #%s", p, l.line, l.dest, resolved, fragment))
			}
		}
	}
	require.Empty(t, broken, "broken links:\n%s", strings.Join(broken, "\n"))
}

// sectionReference is a way the docs name a section of a document by its
// title: the pattern's first group is the title; the document is
// README.md, or the pattern's "file" group, relative to the citing
// document.
type sectionReference struct {
	pattern *regexp.Regexp
	readme  bool
}

var sectionReferences = []sectionReference{
	{regexp.MustCompile(`"([^"]+)" in the README`), true},
	{regexp.MustCompile(`README,? "([^"]+)"`), true},
	{regexp.MustCompile(`"([^"]+)" in \[[^\]]*\]\((?P<file>[^)#\s]+)\)`), false},
	{regexp.MustCompile(`\]\((?P<file>[^)#\s]+)\),? "([^"]+)"`), false},
}

// Every section a document names by its title, as in `see "Retention" in
// [operations.md](operations.md)` or `"Running many tenants" in the
// README`, is a heading, or a labelled paragraph or list item, of that
// document.
func TestSectionsNamedByTitleExist(t *testing.T) {
	t.Parallel()
	var broken []string
	found := 0
	for _, p := range markdownFiles(t) {
		d := parse(t, p)
		flat := strings.Join(strings.Fields(string(d.source)), " ")
		for _, ref := range sectionReferences {
			fileGroup := ref.pattern.SubexpIndex("file")
			for _, m := range ref.pattern.FindAllStringSubmatch(flat, -1) {
				found++
				target, title := "README.md", m[1]
				if fileGroup > 0 {
					target = path.Join(path.Dir(p), m[fileGroup])
					title = m[3-fileGroup]
				}
				if !strings.HasSuffix(target, ".md") {
					continue
				}
				if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(target))); err != nil {
					broken = append(broken, fmt.Sprintf("%s: %q: no such file %s", p, m[0], target))
					continue
				}
				titles := parse(t, target).sections()
				if !slices.ContainsFunc(titles, func(s string) bool { return strings.HasPrefix(s, title) }) {
					broken = append(broken, fmt.Sprintf("%s: %q: %s has no section %q", p, m[0], target, title))
				}
			}
		}
	}
	require.NotZero(t, found, "the patterns find the references the docs make")
	require.Empty(t, broken, "sections named that are not where the text says:\n%s", strings.Join(broken, "\n"))
}

// goSectionReference is how Go comments name a section of a document:
// (README, "Rate limits") or (docs/api.md, "WebSocket"), the path from the
// repository's root.
var goSectionReference = regexp.MustCompile(`\b(README|[\w./-]+\.md),? "([^"]+)"`)

// goCommentBreak is where a comment goes on to its next line.
var goCommentBreak = regexp.MustCompile(`\n\s*//\s*`)

// Every section a Go comment names as (document, "title") is a heading, or
// a labelled paragraph or list item, of that document.
func TestSectionsNamedInGoCommentsExist(t *testing.T) {
	t.Parallel()
	var broken []string
	found := 0
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != repoRoot && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "links_test.go") {
			return nil
		}
		source, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		flat := goCommentBreak.ReplaceAllString(string(source), " ")
		for _, m := range goSectionReference.FindAllStringSubmatch(flat, -1) {
			found++
			target := m[1]
			if target == "README" {
				target = "README.md"
			}
			if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(target))); err != nil {
				broken = append(broken, fmt.Sprintf("%s: %q: no such file %s", p, m[0], target))
				continue
			}
			if !slices.ContainsFunc(parse(t, target).sections(), func(s string) bool { return strings.HasPrefix(s, m[2]) }) {
				broken = append(broken, fmt.Sprintf("%s: %q: %s has no section %q", p, m[0], target, m[2]))
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.NotZero(t, found, "the pattern finds the references the comments make")
	require.Empty(t, broken, "sections named that are not where the comment says:\n%s", strings.Join(broken, "\n"))
}

func TestSlugify(t *testing.T) {
	t.Parallel()
	for heading, want := range map[string]string{
		"Running many tenants":                                   "running-many-tenants",
		"Callbacks, webhooks and their signatures":               "callbacks-webhooks-and-their-signatures",
		"Process presence: a dead baton process costs seconds":   "process-presence-a-dead-baton-process-costs-seconds",
		"Soak: baton soak":                                       "soak-baton-soak",
		"PostgreSQL: a primary and a synchronous standby":        "postgresql-a-primary-and-a-synchronous-standby",
		"Watching it: SQL, REST, live events, metrics, River UI": "watching-it-sql-rest-live-events-metrics-river-ui",
		"baton bench":        "baton-bench",
		"Read further — é_x": "read-further--é_x",
	} {
		require.Equal(t, want, slugify(heading), heading)
	}
}
