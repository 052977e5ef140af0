package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// renderSnapshot prints a frame as aligned tables, one section per view.
func renderSnapshot(out io.Writer, s *monitorSnapshot) error {
	scope := "all tenants"
	if s.Tenant != nil {
		scope = "tenant " + *s.Tenant
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	p := func(format string, a ...any) { fmt.Fprintf(tw, format, a...) }
	p("baton monitor · %s · %s\n", scope, s.GeneratedAt.Format(time.RFC3339))

	p("\nEXECUTIONS  pending %d · running %d · waiting %d\n",
		s.Totals["pending"], s.Totals["running"], s.Totals["waiting"])
	if len(s.Status) == 0 {
		p("(no pending, running or waiting executions)\n")
	} else {
		p("TENANT\tSTATUS\tCOUNT\tAVG AGE\n")
		for _, r := range s.Status {
			p("%s\t%s\t%d\t%s\n", r.TenantID, r.Status, r.Count, seconds(r.AvgAgeSeconds))
		}
	}

	executions := func(title string, l executionList) {
		p("\n%s%s\n", title, shown(len(l.Rows), l.Total))
		if len(l.Rows) == 0 {
			p("(none)\n")
			return
		}
		p("TENANT\tEXECUTION\tWORKFLOW\tTHREAD\tWAITING FOR\tUNTIL\tWAITED\n")
		for _, r := range l.Rows {
			p("%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.TenantID, r.ExecutionID, r.WorkflowID, r.ThreadID,
				deref(r.WaitingFor), timestamp(r.WaitingUntil), seconds(r.WaitingHours*3600))
		}
	}
	executions("WAITING", s.Waiting)
	executions("STUCK (timeout passed, untouched for 1h)", s.Stuck)

	locks := func(title string, l lockList) {
		p("\n%s%s\n", title, shown(len(l.Rows), l.Total))
		if len(l.Rows) == 0 {
			p("(none)\n")
			return
		}
		p("TENANT\tTHREAD\tEXECUTION\tLOCKED AT\tHELD\n")
		for _, r := range l.Rows {
			p("%s\t%s\t%s\t%s\t%s\n", r.TenantID, r.ThreadID, r.ActiveExecutionID,
				timestamp(r.ExecutionLockedAt), seconds(r.LockMinutes*60))
		}
	}
	locks("ACTIVE LOCKS", s.ActiveLocks)
	locks("STALE LOCKS (held over 10m)", s.StaleLocks)

	if !s.Lanes.Available {
		p("\nlanes: not available in this database\n")
	} else {
		p("\nLANES%s\n", shown(len(s.Lanes.Text), int64(s.Lanes.Total)))
		if len(s.Lanes.Text) == 0 {
			p("(none)\n")
		} else {
			p("%s\n", strings.ToUpper(strings.Join(s.Lanes.Columns, "\t")))
			for _, row := range s.Lanes.Text {
				p("%s\n", strings.Join(row, "\t"))
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing the monitor: %w", err)
	}
	return nil
}

// shown is a list's title suffix: its total, and how many rows are shown
// when that is fewer.
func shown(rows int, total int64) string {
	if int64(rows) < total {
		return fmt.Sprintf(" (%d, showing %d)", total, rows)
	}
	return fmt.Sprintf(" (%d)", total)
}

func deref(s *string) string {
	if s == nil || *s == "" {
		return "-"
	}
	return *s
}

func timestamp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// seconds prints an age such as 45s, 12m30s or 3h05m.
func seconds(s float64) string {
	d := time.Duration(s * float64(time.Second)).Round(time.Second)
	switch {
	case d < 0:
		return "-"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}
