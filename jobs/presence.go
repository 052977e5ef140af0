package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/engine"
)

// Process presence: how a dead `baton` process is noticed in seconds.
//
// River hands a job that its worker never finished to another worker only
// once it has been running longer than RescueStuckJobsAfter (over the 60 s
// step timeout), on its rescuer's 30 s round: a SIGKILLed process stranded
// its running steps, their lane slots and their thread locks for 65 to
// 100 s. Each process therefore announces itself in baton_process and holds
// the session advisory lock processLockBase | its row id, on a connection
// of its own, for as long as it lives; PostgreSQL releases that lock the
// moment the process or its connection dies. Every process sweeps on a
// ticker, one at a time (the sweep lock): a row whose lock has stayed free
// for Grace belongs to a dead process, whose running jobs are made available
// at once (JobHandBack) and whose row is deleted. Grace exists because a
// database restart frees every lock at once: the live processes take theirs
// back within a second, before any of them is declared dead.
//
// A process that is alive but cut off from the database for longer than
// Grace is declared dead all the same; with a Fence (PresenceConfig.Fence)
// it stops working its jobs before then (see "Fencing" in fence.go).
// Running a step twice is harmless anyway: a step job advances its
// execution only at the step_seq it was enqueued with, and tool calls carry
// their idempotency key. River's rescuer stays as the backstop for a
// process that is alive but stuck.

const (
	// processLockBase namespaces the processes' advisory locks (key =
	// base | baton_process.id), apart from the outbox locks (1 << 62 |
	// thread id, engine/lock.go).
	processLockBase int64 = 1 << 61
	// sweepLockKey is the transaction advisory lock a sweep takes so that
	// one process sweeps at a time.
	sweepLockKey = processLockBase - 1
)

// Defaults of PresenceConfig.
const (
	// DefaultSweepInterval is how often each process sweeps and checks its
	// own connection: 500 ms.
	DefaultSweepInterval = 500 * time.Millisecond
	// DefaultGrace is how long a process's lock must stay free before the
	// process counts as dead: 2 s, well over the time a live process takes
	// to reconnect after a database restart.
	DefaultGrace = 2 * time.Second
)

// presenceApplicationName names the presence connection in
// pg_stat_activity.
const presenceApplicationName = "baton presence"

// PresenceConfig configures StartPresence.
type PresenceConfig struct {
	// Engine is used to clear stale thread locks after a death and for
	// its transactions. Required.
	Engine *engine.Engine
	// ClientID is the River client ID of this process (Client.ID()): the
	// name its running jobs carry in river_job.attempted_by. Required.
	ClientID string
	// SweepInterval is how often the process sweeps and checks its own
	// connection. Zero means DefaultSweepInterval.
	SweepInterval time.Duration
	// Grace is how long a process's lock must stay free before it counts as
	// dead. Zero means DefaultGrace.
	Grace time.Duration
	// Fence, when set, is the Fence of this process's River client
	// (Config.Fence): it is put up once this process's presence has gone
	// unproven for FenceAfter, which stops the jobs the process is running,
	// and lifted when its presence is proven again. Nil (the default)
	// fences nothing.
	Fence *Fence
	// FenceAfter is how long this process's presence may go unproven (no
	// answer to its presence pings, every SweepInterval, nor to its
	// reconnection) before it puts its Fence up. It must be over
	// SweepInterval and under the Grace of every process's sweep. Zero
	// means Grace − SweepInterval (1.5 s with the defaults).
	FenceAfter time.Duration
	// Logger receives a warning for each dead process handed back, for a
	// lost presence connection and for a fence put up. Nil discards them.
	Logger *slog.Logger
}

// Presence is this process's entry in baton_process and its sweep of the
// others. Stop it after River's client.
type Presence struct {
	pool   *pgxpool.Pool
	q      *dbsqlc.Queries
	cfg    PresenceConfig
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	conn *pgx.Conn // the connection holding the lock, while it does
	id   int64

	// fenceMu guards lastProof and fenceTimer.
	fenceMu sync.Mutex
	// lastProof is when the last proof of presence that got an answer was
	// sent.
	lastProof time.Time
	// fenceTimer puts the fence up FenceAfter after lastProof.
	fenceTimer *time.Timer
}

// StartPresence registers this process and takes its lock, returning once
// both are done, then keeps them (reconnecting as needed) and sweeps until
// Stop.
func StartPresence(ctx context.Context, pool *pgxpool.Pool, cfg PresenceConfig) (*Presence, error) {
	if cfg.Engine == nil || cfg.ClientID == "" {
		return nil, errors.New("jobs: PresenceConfig needs Engine and ClientID")
	}
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = DefaultSweepInterval
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.FenceAfter <= 0 {
		cfg.FenceAfter = cfg.Grace - cfg.SweepInterval
	}
	if cfg.Fence != nil && (cfg.FenceAfter <= cfg.SweepInterval || cfg.FenceAfter >= cfg.Grace) {
		return nil, fmt.Errorf("jobs: PresenceConfig.FenceAfter (%s) must be over SweepInterval (%s) and under Grace (%s)",
			cfg.FenceAfter, cfg.SweepInterval, cfg.Grace)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Presence{pool: pool, q: dbsqlc.New(), cfg: cfg}
	if err := p.register(ctx); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p.cancel = cancel
	p.wg.Add(2)
	go func() { defer p.wg.Done(); p.hold(runCtx) }()
	go func() { defer p.wg.Done(); p.sweepEvery(runCtx) }()
	return p, nil
}

// Stop ends the sweep, deletes this process's row and closes its
// connection, which releases its lock.
func (p *Presence) Stop(ctx context.Context) {
	p.cancel()
	p.wg.Wait()
	p.fenceMu.Lock()
	if p.fenceTimer != nil {
		p.fenceTimer.Stop()
	}
	p.fenceMu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn == nil {
		return
	}
	if err := p.q.ProcessUnregister(ctx, p.conn, p.id); err != nil {
		p.cfg.Logger.WarnContext(ctx, "removing this process from baton_process", "error", err)
	}
	_ = p.conn.Close(ctx)
	p.conn = nil
}

// ID returns this process's baton_process id.
func (p *Presence) ID() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.id
}

// register opens the presence connection and records the process with its
// lock held.
func (p *Presence) register(ctx context.Context) error {
	cc := p.pool.Config().ConnConfig.Copy()
	cc.RuntimeParams["application_name"] = presenceApplicationName
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return fmt.Errorf("connecting for process presence: %w", err)
	}
	host, _ := os.Hostname()
	sent := time.Now()
	id, err := p.q.ProcessRegister(ctx, conn, &dbsqlc.ProcessRegisterParams{
		ClientID: p.cfg.ClientID, Hostname: host, Pid: int32(os.Getpid()), LockBase: processLockBase,
	})
	if err != nil {
		_ = conn.Close(ctx)
		return fmt.Errorf("registering this process: %w", err)
	}
	p.mu.Lock()
	p.conn, p.id = conn, id
	p.mu.Unlock()
	p.proven(ctx, sent)
	return nil
}

// proven records a proof of presence sent at sent and answered: the lock
// was held at some moment after sent. It lifts the fence and sets it to go
// up FenceAfter after sent.
func (p *Presence) proven(ctx context.Context, sent time.Time) {
	if p.cfg.Fence == nil {
		return
	}
	p.fenceMu.Lock()
	defer p.fenceMu.Unlock()
	if sent.Before(p.lastProof) {
		return // a later proof has been answered already
	}
	p.lastProof = sent
	wait := time.Until(sent.Add(p.cfg.FenceAfter))
	if p.fenceTimer == nil {
		p.fenceTimer = time.AfterFunc(wait, func() { p.lapse(context.WithoutCancel(ctx)) })
	} else {
		p.fenceTimer.Reset(wait)
	}
	if p.cfg.Fence.lift() {
		p.cfg.Logger.WarnContext(ctx, "process presence proven again; this process works jobs again", "client_id", p.cfg.ClientID)
	}
}

// lapse puts the fence up unless a proof of presence came meanwhile.
func (p *Presence) lapse(ctx context.Context) {
	p.fenceMu.Lock()
	defer p.fenceMu.Unlock()
	if time.Since(p.lastProof) < p.cfg.FenceAfter {
		return
	}
	if p.cfg.Fence.fence() {
		p.cfg.Logger.WarnContext(ctx, "process presence unproven; this process stops its running jobs and works none until it is back, "+
			"since the process sweep may hand them to others", "client_id", p.cfg.ClientID, "unproven_for", time.Since(p.lastProof))
	}
}

// hold checks the presence connection every SweepInterval and, when it is
// lost (a database restart, a failover), opens another and takes the lock
// again, backing off from 100 ms to 1 s between failed attempts.
func (p *Presence) hold(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(p.cfg.SweepInterval):
		}
		p.mu.Lock()
		conn := p.conn
		p.mu.Unlock()
		if conn != nil {
			sent := time.Now()
			if p.alive(ctx, conn) {
				p.proven(ctx, sent)
				continue
			}
			p.cfg.Logger.WarnContext(ctx, "process presence connection lost; reconnecting", "client_id", p.cfg.ClientID)
			p.mu.Lock()
			p.conn = nil
			p.mu.Unlock()
			_ = conn.Close(context.WithoutCancel(ctx))
		}
		for ctx.Err() == nil {
			err := p.register(ctx)
			if err == nil {
				backoff = 100 * time.Millisecond
				p.cfg.Logger.InfoContext(ctx, "process presence restored", "client_id", p.cfg.ClientID, "process_id", p.ID())
				break
			}
			p.cfg.Logger.DebugContext(ctx, "process presence: reconnecting", "error", err)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
		}
	}
}

// alive pings the presence connection, giving up after a few sweep
// intervals (a server that went silent).
func (p *Presence) alive(ctx context.Context, conn *pgx.Conn) bool {
	pingCtx, cancel := context.WithTimeout(ctx, 4*p.cfg.SweepInterval)
	defer cancel()
	return conn.Ping(pingCtx) == nil
}

// sweepEvery runs Sweep every SweepInterval until ctx ends, logging a
// failure once until a sweep succeeds again.
func (p *Presence) sweepEvery(ctx context.Context) {
	t := time.NewTicker(p.cfg.SweepInterval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_, err := p.Sweep(ctx)
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			p.cfg.Logger.WarnContext(ctx, "process sweep failed", "error", err)
			failing = true
		case err == nil:
			failing = false
		}
	}
}

// Sweep is what one sweep found.
type Sweep struct {
	// Ran is false when another process was sweeping.
	Ran bool
	// Dead are the River client IDs of the processes found dead.
	Dead []string
	// HandedBack counts the running jobs of dead processes made available
	// (or cancelled, or discarded) again.
	HandedBack int
}

// Sweep checks every process's lock once: a lock newly found free is
// recorded, one found held again is cleared, and a process whose lock has
// stayed free for Grace is dead: its running jobs are handed back, River's
// leadership is released if it held it, and its row is deleted, all in one
// transaction. Stale thread locks are then reaped at once. This process
// itself is never declared dead by its own sweep.
func (p *Presence) Sweep(ctx context.Context) (Sweep, error) {
	var out Sweep
	err := p.cfg.Engine.WithTx(ctx, func(tx pgx.Tx) error {
		out = Sweep{}
		won, err := p.q.ProcessSweepLock(ctx, tx, sweepLockKey)
		if err != nil || !won {
			return err
		}
		out.Ran = true
		rows, err := p.q.ProcessCheck(ctx, tx, &dbsqlc.ProcessCheckParams{GraceSeconds: p.cfg.Grace.Seconds(), LockBase: processLockBase})
		if err != nil {
			return fmt.Errorf("checking processes: %w", err)
		}
		var lost, found, deadIDs []int64
		for _, r := range rows {
			switch {
			case r.ClientID == p.cfg.ClientID:
			case r.LockFree && r.LostPastGrace:
				deadIDs = append(deadIDs, r.ID)
				out.Dead = append(out.Dead, r.ClientID)
			case r.LockFree && !r.Lost:
				lost = append(lost, r.ID)
			case !r.LockFree && r.Lost:
				found = append(found, r.ID)
			}
		}
		if err := p.q.ProcessMarkLost(ctx, tx, lost); err != nil {
			return fmt.Errorf("recording lost processes: %w", err)
		}
		if err := p.q.ProcessMarkFound(ctx, tx, found); err != nil {
			return fmt.Errorf("recording processes back: %w", err)
		}
		if len(deadIDs) == 0 {
			return nil
		}
		handed, err := p.q.JobHandBack(ctx, tx, &dbsqlc.JobHandBackParams{
			ClientIds: out.Dead,
			Message:   "the worker process running this job died; Baton's process sweep handed it back",
		})
		if err != nil {
			return fmt.Errorf("handing back the jobs of dead processes: %w", err)
		}
		out.HandedBack = len(handed)
		if _, err := p.q.LeaderResignGone(ctx, tx, out.Dead); err != nil {
			return fmt.Errorf("releasing a dead process's leadership: %w", err)
		}
		return p.q.ProcessDelete(ctx, tx, deadIDs)
	})
	if err != nil || len(out.Dead) == 0 {
		return out, err
	}
	p.cfg.Logger.WarnContext(ctx, "worker processes died; their running jobs were handed back",
		"dead", out.Dead, "jobs", out.HandedBack)
	if _, err := p.cfg.Engine.ReapLocks(ctx); err != nil {
		return out, fmt.Errorf("reaping stale locks after a death: %w", err)
	}
	return out, nil
}
