package adapter

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/searchfabric/sfemu/emulator"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/normalize"
	"github.com/searchfabric/sfemu/spill"
	"github.com/searchfabric/sfemu/upstream/pd"
)

// Adapter is a running Mini-CDC adapter feeding an emulator.
type Adapter struct {
	RT     *minicdc.Runtime
	Bridge *normalize.Bridge
	Resume normalize.Resume
	Tables []normalize.Table

	// GC is the service GC safe point held at the checkpoint (nil in
	// process).
	GC *pd.ServiceSafePoint

	feed   *storeFeed
	gcHold *pd.Hold
	live   *liveSet
	// spillDir is the spill directory (nil without a data dir): the log
	// puller's prewrite runs are counted there.
	spillDir *spill.Dir

	// stopAdds cancels the snapshots of joining tables (LT6).
	stopAdds context.CancelFunc

	closeOnce sync.Once
	closeErr  error
}

// Start resolves the tables, opens the bridge (resume point and
// epoch from the emulator's stored progress), opens the schema store and
// starts the Mini-CDC runtime from the resume point.
//
// The schema store follows the DDL job span through its own source
// (Upstream.NewSource), delivered on its own goroutine (storeFeed). Over
// PD the adapter holds a service GC safe point at its checkpoint (SR2).
func Start(ctx context.Context, up *Upstream, emu *emulator.Emulator, cfg Config) (*Adapter, error) {
	// With a filter the set may start empty: tables join by DDL (LT8).
	if len(cfg.Tables) == 0 && cfg.Filter == nil {
		return nil, errors.New("adapter: no tables to mirror")
	}
	// A joining table's snapshot a stop interrupted is dropped (LT6).
	if err := dropUnfinishedAdds(ctx, cfg.sink(emu), cfg, cfg.Log); err != nil {
		return nil, err
	}
	// A fresh data dir reads the tables at a snapshot ts first (SN1).
	if a, ok, err := startWithSnapshot(ctx, up, emu, cfg); ok {
		return a, err
	}
	if cfg.Filter != nil {
		refs, err := tablesAtResume(ctx, up, cfg.sink(emu), cfg)
		if err != nil {
			return nil, err
		}
		cfg.Tables = refs
	}
	tables, err := resolveTables(ctx, up, cfg.Tables, cfg.StartTs)
	if err != nil {
		return nil, err
	}
	// The same view of the emulator the bridge gets.
	if tables, err = alignWithMapped(ctx, up, cfg.sink(emu), cfg.Bridge.KeyspaceID, cfg.Tables, tables); err != nil {
		return nil, err
	}
	return startWithTables(ctx, up, emu, cfg, tables)
}

// startWithTables starts an adapter over a resolved table set, phase by
// phase: resume point → GC hold → schema store → runtime delivering to
// the bridge. A phase that fails undoes what the earlier ones started.
func startWithTables(ctx context.Context, up *Upstream, emu *emulator.Emulator, cfg Config, tables []normalize.Table) (*Adapter, error) {
	if len(tables) == 0 && cfg.Filter == nil {
		return nil, errors.New("adapter: no physical tables to mirror")
	}
	cfg = cfg.withDefaults()
	if err := cfg.prepareMemory(); err != nil {
		return nil, err
	}

	rp, err := openResumePoint(ctx, up, cfg.sink(emu), resumeConfig{StartTs: cfg.StartTs, ClientID: cfg.ClientID, Bridge: cfg.Bridge}, tables)
	if err != nil {
		return nil, err
	}
	startTs := rp.resume.StartTs

	// Before anything reads history.
	hold, err := holdGC(ctx, up, cfg.GC, startTs)
	if err != nil {
		return nil, err
	}
	// A start that fails after the hold was set keeps it when the emulator
	// has stored progress (a previous run's; the hold now protects it, as
	// after a fatal stop) and removes it otherwise (nothing depends on it).
	fail := func(err error) (*Adapter, error) {
		if hold != nil {
			_ = hold.Stop(len(rp.resume.Stored) == 0)
		}
		return nil, err
	}

	feed, err := startSchemaStore(up, storeConfig{Dir: filepath.Join(cfg.DataDir, "schemastore"), Poll: cfg.SourcePoll, StartTs: startTs})
	if err != nil {
		return fail(err)
	}

	ids := make([]int64, len(tables))
	for i, t := range tables {
		ids[i] = t.PhysicalID
	}
	live := newLiveSet(callbacks(rp.bridge, cfg.Tap, hold), rp.bridge, up, cfg.Filter, cfg.Log, tables)
	addCtx, addCancel := context.WithCancel(context.Background())
	live.add = &addRuntime{ctx: addCtx, up: up, sink: cfg.sink(emu), cfg: cfg}
	rt, err := startRuntime(ctx, up, feed.store,
		runtimeConfig{StartTs: startTs, TableIDs: ids, TableStartTs: TableStarts(rp.resume, cfg.Bridge.KeyspaceID, tables),
			DDLPollLimit: cfg.DDLPollLimit, Poll: cfg.SourcePoll, Options: cfg.Runtime, Matcher: cfg.matcherMemory()},
		live)
	if err != nil {
		addCancel()
		_ = feed.stop()
		return fail(err)
	}
	live.attach(rt)

	a := &Adapter{RT: rt, Bridge: rp.bridge, Resume: rp.resume, Tables: tables, feed: feed, gcHold: hold, live: live, spillDir: cfg.Bridge.Spill.Dir, stopAdds: addCancel}
	if hold != nil {
		a.GC = hold.SafePoint()
	}
	return a, nil
}

// Done is closed when the runtime stops.
func (a *Adapter) Done() <-chan struct{} { return a.RT.Done() }

// Close stops the runtime (which closes its source and the schema store)
// and then the store's source. Over PD, a clean stop (no fatal error)
// removes the service GC safe point; after a fatal error (a table-set
// change included) it stays, so the next adapter, or a restart within its
// TTL, still finds the history from the checkpoint on (P6, SR2). It
// returns the runtime's fatal error, if any. It is idempotent.
func (a *Adapter) Close() error {
	a.closeOnce.Do(func() {
		// Snapshots of joining tables stop first; their marks stay, so the
		// next start drops what they wrote (LT6).
		if a.stopAdds != nil {
			a.stopAdds()
		}
		a.live.wg.Wait()
		err := a.RT.Close()
		// What the reorder buffers still hold was not acknowledged: the
		// next adapter redelivers it; return its memory and spill files.
		if rerr := a.Bridge.Release(); err == nil && rerr != nil {
			err = fmt.Errorf("adapter: releasing the reorder buffers: %w", rerr)
		}
		if serr := a.feed.stop(); err == nil && serr != nil {
			err = fmt.Errorf("adapter: schema store source: %w", serr)
		}
		if a.gcHold != nil {
			if gerr := a.gcHold.Stop(err == nil); err == nil {
				err = gerr
			}
		}
		a.closeErr = err
	})
	return a.closeErr
}

// MatcherSpill is the log puller's prewrite spill (specs/logpuller.md
// LP14): run files on disk now and runs written since the start.
func (a *Adapter) MatcherSpill() (files int64, runs uint64) {
	if a.spillDir == nil {
		return 0, 0
	}
	return a.spillDir.PrewriteFiles(), a.spillDir.PrewriteRuns()
}
