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
	// Lanes is the number of sessions the steps are spread over
	// (demo.Workload.SetLane; default DefaultLanes).
	Lanes int
}

// DefaultLanes: steps due together run on this many sessions at once.
// Each step waits for its commit's fsync; run one after another they
// cap the rate at one step per fsync (3-5 ms on a busy disk, so the
// advertised 200 tx/s sagged whenever the disk was slow). Lanes let one
// fsync cover the commits of several steps (S25).
const DefaultLanes = 4

// tickEvery is the runner's shortest tick: at 200 tx/s four steps are due
// at each, one per lane.
const tickEvery = 20 * time.Millisecond

// Runner is the demo workload over one upstream.
type Runner struct {
	sql   *sqlfront.Server
	clock kvevent.Clock
	cfg   Config
	// lanes are the workloads run at once, each on its own session;
	// lane 0 runs the DDLs.
	lanes []*demo.Workload
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
	if cfg.Lanes <= 0 {
		cfg.Lanes = DefaultLanes
	}
	r := &Runner{sql: sql, clock: clock, cfg: cfg}
	for k := 0; k < cfg.Lanes; k++ {
		w := demo.NewWorkload(cfg.Seed+int64(k), sql.NewSession(""))
		w.SetLane(k, cfg.Lanes)
		w.DDLEvery = 0
		w.Now = func() string { return time.Now().UTC().Format("2006-01-02 15:04:05.000") }
		r.lanes = append(r.lanes, w)
	}
	// Lane 0 runs a DDL every DDLEvery steps of all lanes together.
	if cfg.DDLEvery > 0 {
		r.lanes[0].DDLEvery = max(cfg.DDLEvery/cfg.Lanes, 1)
	}
	if err := r.resume(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Runner) resume(ctx context.Context) error {
	ts, err := r.clock.CurrentTs(ctx)
	if err != nil {
		return fmt.Errorf("demo workload: %w", err)
	}
	return demo.ResumeLanes(ctx, r.sql, ts, r.lanes)
}

// Run steps the workload at cfg.Rate until ctx ends (nil) or a step fails.
// Each tick's steps hold pause, so a consistency check holding it sees no
// write in progress.
func (r *Runner) Run(ctx context.Context, pause *sync.Mutex) error {
	if r.cfg.Rate <= 0 {
		return nil
	}
	// A tick every tickEvery (or per step when slower): the steps due
	// at a tick run on the lanes at once and share their fsyncs (S25).
	interval := time.Second / time.Duration(r.cfg.Rate)
	t := time.NewTicker(max(interval, tickEvery))
	defer t.Stop()
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
		err := r.runSteps(ctx, n)
		pause.Unlock()
		if err != nil {
			return err
		}
	}
}

// runSteps runs n steps spread over the lanes, the lanes at once, and
// returns when all are done.
func (r *Runner) runSteps(ctx context.Context, n int) error {
	lanes := min(n, len(r.lanes))
	errs := make([]error, lanes)
	var wg sync.WaitGroup
	for k := 0; k < lanes; k++ {
		steps := n / lanes
		if k < n%lanes {
			steps++
		}
		wg.Add(1)
		go func(w *demo.Workload, steps int, err *error) {
			defer wg.Done()
			var st demo.Stats
			for i := 0; i < steps && *err == nil; i++ {
				if *err = w.Step(ctx, &st); *err == nil {
					r.steps.Add(1)
				}
			}
		}(r.lanes[k], steps, &errs[k])
	}
	wg.Wait()
	dup := false
	for _, err := range errs {
		if errors.Is(err, sqlfront.ErrDuplicateKey) {
			dup = true
		} else if err != nil {
			return err
		}
	}
	if dup {
		// A row written from outside (/upstream/sql, the MySQL front)
		// took an id a lane wanted: every lane continues above the ids
		// stored now.
		return r.resume(ctx)
	}
	return nil
}
