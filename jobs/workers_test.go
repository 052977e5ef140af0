package jobs

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"
)

// A job's last attempt that met a database outage is snoozed, not turned
// into a failed execution; any other error on the last attempt fails it
// (the engine tests show the failing), and earlier attempts just retry.
func TestLastAttemptMeetingAnOutageIsSnoozed(t *testing.T) {
	t.Parallel()
	_, eng := presenceEngine(t)
	ctx := context.Background()
	shutdown := &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}
	last := &rivertype.JobRow{Attempt: 25, MaxAttempts: 25}

	err := failOnLastAttempt(ctx, eng, last, 1, 1, "step", shutdown)
	var snooze *rivertype.JobSnoozeError
	require.ErrorAs(t, err, &snooze)
	require.Equal(t, outageSnooze, snooze.Duration)

	err = failOnLastAttempt(ctx, eng, &rivertype.JobRow{Attempt: 3, MaxAttempts: 25}, 1, 1, "step", shutdown)
	require.ErrorIs(t, err, shutdown, "an earlier attempt retries")

	broken := errors.New("tool exploded")
	err = failOnLastAttempt(ctx, eng, last, 1, 1, "step", broken)
	require.ErrorIs(t, err, broken)
	require.NotErrorAs(t, err, &snooze)
}
