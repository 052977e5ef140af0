package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/batonrun/baton/internal/pgcluster"
)

// One tiny round of every figure, on DATABASE_URL or a private cluster,
// checks the wiring: every series measured once, something counted, every
// round's correctness checks passed, and the ratios computed.
func TestOneTinyRound(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: starts PostgreSQL and runs every figure")
	}
	c := config{databaseURL: os.Getenv("DATABASE_URL"), rounds: 1, duration: time.Second, warmup: 200 * time.Millisecond,
		clients: 4, keys: 4, keyedClients: 8, chains: 4, waiting: 20, queuePoll: 10 * time.Millisecond, maxConns: 20, jsonOut: true}
	if c.databaseURL == "" {
		c.dataDir = clusterDir(t)
	}
	var out bytes.Buffer
	err := run(context.Background(), c, &out, t.Logf)
	if errors.Is(err, pgcluster.ErrNoBinaries) {
		t.Skipf("skipping: no PostgreSQL binaries on this machine: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Series []struct {
			Key    string `json:"key"`
			Rounds []struct {
				Count int `json:"count"`
			} `json:"rounds"`
		} `json:"series"`
		Ratios []struct {
			Numerator string    `json:"numerator"`
			PerRound  []float64 `json:"per_round"`
		} `json:"ratios"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if len(got.Series) != 10 {
		t.Fatalf("%d series, want 10: %s", len(got.Series), out.String())
	}
	for _, s := range got.Series {
		if len(s.Rounds) != 1 || s.Rounds[0].Count == 0 {
			t.Errorf("series %s: rounds %+v, want one with a count", s.Key, s.Rounds)
		}
	}
	for _, r := range got.Ratios {
		if len(r.PerRound) != 1 || r.PerRound[0] <= 0 {
			t.Errorf("ratio of %s: %v, want one positive value", r.Numerator, r.PerRound)
		}
	}
}

// clusterDir returns a fresh directory for a private cluster whose parents
// the postgres OS user can search, which it needs when the test runs as
// root (t.TempDir makes 0700 directories).
func clusterDir(t *testing.T) string {
	t.Helper()
	tmp := t.TempDir()
	for _, d := range []string{filepath.Dir(tmp), tmp} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(tmp, "data")
}
