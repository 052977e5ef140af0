package pgcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ErrNoBinaries says that initdb and pg_ctl were found neither on PATH nor in
// /usr/lib/postgresql/*/bin. Callers that can do without a cluster (tests)
// check for it with errors.Is.
var ErrNoBinaries = errors.New("PostgreSQL binaries not found")

// libDirGlob is where Debian and Ubuntu install each PostgreSQL version's
// binaries without putting them on PATH.
const libDirGlob = "/usr/lib/postgresql/*/bin"

// binaries holds the absolute paths of the PostgreSQL programs Start runs.
type binaries struct {
	initdb string
	pgCtl  string
	// pgBasebackup is empty when pg_basebackup was not found; only making a
	// standby needs it.
	pgBasebackup string
}

// findBinaries looks for initdb and pg_ctl on PATH, then in the
// highest-versioned /usr/lib/postgresql/*/bin that holds both.
func findBinaries() (binaries, error) {
	initdb, errInit := exec.LookPath("initdb")
	pgCtl, errCtl := exec.LookPath("pg_ctl")
	if errInit == nil && errCtl == nil {
		return withBasebackup(binaries{initdb: absPath(initdb), pgCtl: absPath(pgCtl)}), nil
	}
	dirs, err := filepath.Glob(libDirGlob)
	if err != nil {
		return binaries{}, fmt.Errorf("listing %s: %w", libDirGlob, err)
	}
	var best string
	var bestVersion []int
	for _, d := range dirs {
		if !isExecutable(filepath.Join(d, "initdb")) || !isExecutable(filepath.Join(d, "pg_ctl")) {
			continue
		}
		v := parseVersion(filepath.Base(filepath.Dir(d)))
		if best == "" || slices.Compare(v, bestVersion) > 0 {
			best, bestVersion = d, v
		}
	}
	if best == "" {
		return binaries{}, fmt.Errorf("%w: initdb and pg_ctl are neither on PATH nor in %s; install PostgreSQL's server package", ErrNoBinaries, libDirGlob)
	}
	return withBasebackup(binaries{initdb: filepath.Join(best, "initdb"), pgCtl: filepath.Join(best, "pg_ctl")}), nil
}

// withBasebackup sets b.pgBasebackup to the pg_basebackup beside pg_ctl, else
// the one on PATH, else leaves it empty.
func withBasebackup(b binaries) binaries {
	if p := filepath.Join(filepath.Dir(b.pgCtl), "pg_basebackup"); isExecutable(p) {
		b.pgBasebackup = p
	} else if p, err := exec.LookPath("pg_basebackup"); err == nil {
		b.pgBasebackup = absPath(p)
	}
	return b
}

// parseVersion turns a directory name such as "16" or "9.6" into numbers that
// compare in version order; a name that is not a version sorts first.
func parseVersion(s string) []int {
	var v []int
	for part := range strings.SplitSeq(s, ".") {
		n, err := strconv.Atoi(part)
		if err != nil {
			return nil
		}
		v = append(v, n)
	}
	return v
}

// isExecutable reports whether path is a regular file with an execute bit.
func isExecutable(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o111 != 0
}
