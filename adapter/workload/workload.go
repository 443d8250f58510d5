// Package workload drives the demo workload (fakeupstream/demo) against
// the embedded upstream's SQL front at a steady rate: what `sfemu run`
// writes in the embedded mode.
package workload

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/searchfabric/sfemu/fakeupstream/demo"
	"github.com/searchfabric/sfemu/fakeupstream/sqlfront"
	"github.com/searchfabric/sfemu/upstream/kvevent"
)

// Config configures New and Run.
type Config struct {
	// Seed seeds the workload's choices.
	Seed int64
	// Rate is the number of workload steps per second (<= 0: none).
	Rate int
	// DDLEvery is the number of steps between DDLs (demo.Workload.DDLEvery).
	DDLEvery int
}

// Runner is the demo workload over one upstream.
type Runner struct {
	sql   *sqlfront.Server
	clock kvevent.Clock
	cfg   Config
	w     *demo.Workload
	// steps counts the transactions done so far (Steps).
	steps atomic.Int64
}

// Steps is the number of workload transactions done so far (a soak
// measures its rate over time).
func (r *Runner) Steps() int64 { return r.steps.Load() }

// New builds the demo workload over the upstream's current content: over
// a reopened upstream, product and event ids continue above the stored
// ones (demo.Workload.Resume).
func New(ctx context.Context, sql *sqlfront.Server, clock kvevent.Clock, cfg Config) (*Runner, error) {
	r := &Runner{sql: sql, clock: clock, cfg: cfg, w: demo.NewWorkload(cfg.Seed, sql.NewSession(""))}
	if err := r.resume(ctx); err != nil {
		return nil, err
	}
	r.w.DDLEvery = cfg.DDLEvery
	r.w.Now = func() string { return time.Now().UTC().Format("2006-01-02 15:04:05.000") }
	return r, nil
}

func (r *Runner) resume(ctx context.Context) error {
	ts, err := r.clock.CurrentTs(ctx)
	if err != nil {
		return fmt.Errorf("demo workload: %w", err)
	}
	return r.w.Resume(ctx, r.sql, ts)
}

// Run steps the workload at cfg.Rate until ctx ends (nil) or a step fails.
// Each tick's steps hold pause, so a consistency check holding it sees no
// write in progress.
func (r *Runner) Run(ctx context.Context, pause *sync.Mutex) error {
	if r.cfg.Rate <= 0 {
		return nil
	}
	interval := time.Second / time.Duration(r.cfg.Rate)
	t := time.NewTicker(max(interval, time.Millisecond))
	defer t.Stop()
	var st demo.Stats
	// The rate is kept by schedule, not by tick: a ticker drops ticks
	// while a step (with its fsync) runs late, which lost a fifth of the
	// advertised rate on a loaded machine. Each tick runs the steps due
	// since start; a backlog beyond one second's worth is dropped, so a
	// machine that cannot keep up is not flooded afterwards.
	start, done := time.Now(), int64(0)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		due := int64(time.Since(start).Seconds()*float64(r.cfg.Rate)) - done
		if due > int64(r.cfg.Rate) {
			done += due - int64(r.cfg.Rate)
			due = int64(r.cfg.Rate)
		}
		n := int(due)
		if n <= 0 {
			continue
		}
		done += due
		pause.Lock()
		for i := 0; i < n; i++ {
			err := r.w.Step(ctx, &st)
			if errors.Is(err, sqlfront.ErrDuplicateKey) {
				// A row written from outside (/upstream/sql, the MySQL
				// front) took the id the workload wanted: continue above
				// the ids stored now.
				err = r.resume(ctx)
			}
			if err != nil {
				pause.Unlock()
				return err
			}
			r.steps.Add(1)
		}
		pause.Unlock()
	}
}
