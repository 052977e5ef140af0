package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// envName is an environment variable's name as help texts write it.
var envName = regexp.MustCompile(`\b(DATABASE_URL|TMPDIR|BATON_[A-Z_]+)\b`)

// envLine is a line of a help's environment section, which starts with
// the variable's name.
var envLine = regexp.MustCompile(`^  ([A-Z_]+) `)

// Every command's -h says, before its flags, how it is called, what it does
// in one line, and the environment it reads: serve and token name
// BATON_JWT_SECRET, whatever needs a database names DATABASE_URL. Every
// variable a flag's own text names is in that list too. The help goes to
// stdout, and -h exits 0.
func TestEveryCommandsHelpSaysWhatItDoesAndItsEnvironment(t *testing.T) {
	t.Parallel()
	needs := map[string][]string{
		"serve":   {"DATABASE_URL", "BATON_JWT_SECRET", "BATON_ADDR", "BATON_CONFIG", "BATON_LOCK_TIMEOUT", "BATON_METRICS_TOKEN", "BATON_CALLBACK_SECRET", "BATON_WEBHOOK_SECRET"},
		"migrate": {"DATABASE_URL"},
		"dev":     {"DATABASE_URL", "BATON_ADDR", "BATON_CONFIG", "TMPDIR"},
		"demo":    {"DATABASE_URL"},
		"token":   {"BATON_JWT_SECRET", "BATON_JWT_AUDIENCE", "BATON_JWT_ISSUER"},
		"bench":   {"DATABASE_URL"},
		"soak":    {"DATABASE_URL"},
		"monitor": {"DATABASE_URL"},
	}
	for name, want := range needs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cmd := command(t, nil, name, "-h")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			require.NoError(t, cmd.Run(), "baton %s -h exits 0: %s", name, stderr.String())
			require.Empty(t, stderr.String())

			head, flags, ok := strings.Cut(stdout.String(), "\nflags:\n")
			require.True(t, ok, "a flags: section:\n%s", stdout.String())
			lines := strings.Split(head, "\n")
			require.GreaterOrEqual(t, len(lines), 3, "%s", head)
			require.True(t, strings.HasPrefix(lines[0], "usage: baton "+name), "first line: %q", lines[0])
			require.Empty(t, lines[1])
			description := lines[2]
			require.Regexp(t, `^[A-Z].{20,}\.$`, description, "one line saying what %s does", name)

			_, env, ok := strings.Cut(head, "\nenvironment")
			require.True(t, ok, "an environment section:\n%s", head)
			listed := map[string]bool{}
			for _, line := range strings.Split(env, "\n")[1:] {
				if m := envLine.FindStringSubmatch(line); m != nil {
					listed[m[1]] = true
				}
			}
			for _, v := range want {
				require.True(t, listed[v], "baton %s -h lists %s:\n%s", name, v, head)
			}
			for _, v := range envName.FindAllString(flags, -1) {
				require.True(t, listed[v], "a flag of baton %s names %s, which its environment section does not:\n%s", name, v, stdout.String())
			}
		})
	}
}

// baton help lists every command with what it does.
func TestUsageListsEveryCommand(t *testing.T) {
	t.Parallel()
	out, err := command(t, nil, "help").Output()
	require.NoError(t, err)
	for _, name := range []string{"serve", "migrate", "dev", "demo", "token", "bench", "soak", "monitor"} {
		require.Regexp(t, `(?m)^  `+name+` +[a-z].{20,}$`, string(out))
	}
}
