package benchkit

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"time"
)

// CommitMeter counts the transactions the database commits over a window,
// less the read-only ones a watch spent polling.
type CommitMeter struct {
	Pool *pgxpool.Pool
	// Polls, when set, reports the lookups to leave out.
	Polls func() int64

	commits, polls int64
}

var _ Meter = (*CommitMeter)(nil)

// Open reads the counters.
func (m *CommitMeter) Open(ctx context.Context) error {
	m.polls = m.readPolls()
	n, err := Commits(ctx, m.Pool)
	m.commits = n
	return err
}

// Close turns the counters into the window's counts.
func (m *CommitMeter) Close(ctx context.Context) error {
	n, err := Commits(ctx, m.Pool)
	m.commits = n - m.commits
	m.polls = m.readPolls() - m.polls
	return err
}

// Counted is the transactions committed over the window, the polls left
// out; valid after Close.
func (m *CommitMeter) Counted() int64 { return m.commits - m.polls }

func (m *CommitMeter) readPolls() int64 {
	if m.Polls == nil {
		return 0
	}
	return m.Polls()
}

// ClockMeter reads the database's clock at both ends of the window, to find
// the rows the window wrote.
type ClockMeter struct {
	Pool *pgxpool.Pool
	// From and To are the window's ends by the database's clock.
	From, To time.Time
}

var _ Meter = (*ClockMeter)(nil)

// Open reads From.
func (m *ClockMeter) Open(ctx context.Context) error { return m.read(ctx, &m.From) }

// Close reads To.
func (m *ClockMeter) Close(ctx context.Context) error { return m.read(ctx, &m.To) }

func (m *ClockMeter) read(ctx context.Context, t *time.Time) error {
	if err := m.Pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(t); err != nil {
		return fmt.Errorf("reading the database's clock: %w", err)
	}
	return nil
}
