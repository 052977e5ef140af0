package jobs

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// Fencing: a process cut off from the database stops working its jobs
// before they can run anywhere else.
//
// The process sweep (presence.go) hands the running jobs of a process
// whose presence lock has stayed free for Grace to the others. A process
// whose presence connection is cut and cannot come back is alive all the
// same: it would go on working those jobs, and tool calls and deliveries
// would run twice. So each process fences itself. Its presence is proven
// each time a ping of its presence connection, or its registration, gets
// an answer: the lock was held when the server answered, so no other
// process can have seen it free before the moment the proof was sent.
// Once FenceAfter passes without a new proof, the process cancels the
// contexts of the River jobs it is running (with ErrFenced as their
// cause), each of which then goes back to `available` without using an
// attempt (river.JobSnooze(0)), and it snoozes every job it fetches until
// its presence is proven again. Another process hands the jobs away no
// sooner than Grace after the lock was freed, which is after the last
// proof was sent: with FenceAfter shorter than Grace the process has
// stopped its jobs Grace − FenceAfter before (500 ms by default), on
// clocks that run at the same rate. A job whose code does not heed its
// context is not stopped by it; Baton's workers all do.

// ErrFenced is the cause of the context of a job this process stopped
// working because its presence went unproven for FenceAfter: the process
// sweep may hand the job to another process.
var ErrFenced = errors.New("this process could not prove its presence in time: its running jobs may be handed to other processes")

// fencedSnooze is how long a job fetched while this process is fenced is
// put off: the process may be back by then, and another may take it.
const fencedSnooze = time.Second

// Fence is River worker middleware that stops this process's jobs while its
// presence goes unproven (see "Fencing"). Give the same Fence to NewClient
// (Config.Fence) and StartPresence (PresenceConfig.Fence). Its zero value
// is not usable: make one with NewFence.
type Fence struct {
	river.MiddlewareDefaults

	mu      sync.Mutex
	fenced  bool
	running map[*fencedJob]struct{}
}

var _ rivertype.WorkerMiddleware = (*Fence)(nil)

// fencedJob is a job being worked, and how to stop it.
type fencedJob struct {
	cancel context.CancelCauseFunc
}

// NewFence returns a Fence that lets jobs run.
func NewFence() *Fence {
	return &Fence{running: map[*fencedJob]struct{}{}}
}

// Work runs the job under a context the fence can cancel. A job fenced
// while it runs, or fetched while the process is fenced, is snoozed: it
// goes back to the queue without using an attempt.
func (f *Fence) Work(ctx context.Context, _ *rivertype.JobRow, doInner func(context.Context) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(context.Canceled)
	job := &fencedJob{cancel: cancel}
	f.mu.Lock()
	if f.fenced {
		f.mu.Unlock()
		return river.JobSnooze(fencedSnooze)
	}
	f.running[job] = struct{}{}
	f.mu.Unlock()
	err := doInner(ctx)
	f.mu.Lock()
	delete(f.running, job)
	f.mu.Unlock()
	if err != nil && errors.Is(context.Cause(ctx), ErrFenced) {
		return river.JobSnooze(0)
	}
	return err
}

// fence stops the jobs running and keeps new ones from running until lift.
// It reports whether the process was not fenced already.
func (f *Fence) fence() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fenced {
		return false
	}
	f.fenced = true
	for job := range f.running {
		job.cancel(ErrFenced)
	}
	return true
}

// lift lets jobs run again. It reports whether the process was fenced.
func (f *Fence) lift() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	was := f.fenced
	f.fenced = false
	return was
}

// Fenced reports whether the fence is up: this process works no job.
func (f *Fence) Fenced() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fenced
}
