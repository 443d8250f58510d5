package adapter

// Phases 1 and 2 of Start (the table set, the resume point) for a host
// that runs the rest itself: the deterministic simulator (sim/) starts the
// schema store and the runtime on its own sources and drives them from one
// goroutine, but resolves and aligns the table set and opens the bridge
// exactly as Start does.

import (
	"context"
	"errors"

	"github.com/searchfabric/sfemu/emulator"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/normalize"
)

// ResolveTableSet is Start's table set: the physical tables of
// cfg.Tables, aligned with what the emulator's collections map (SR10).
func ResolveTableSet(ctx context.Context, up *Upstream, emu *emulator.Emulator, cfg Config) ([]normalize.Table, error) {
	if len(cfg.Tables) == 0 {
		return nil, errors.New("adapter: no tables to mirror")
	}
	tables, err := resolveTables(ctx, up, cfg.Tables, cfg.StartTs)
	if err != nil {
		return nil, err
	}
	return alignWithMapped(ctx, up, cfg.sink(emu), cfg.Bridge.KeyspaceID, cfg.Tables, tables)
}

// OpenBridge is Start's resume phase over tables: the memory quota and
// spill directory, then the bridge opened on the emulator's stored
// progress (M48). Resume.StartTs is where the runtime must start.
func OpenBridge(ctx context.Context, up *Upstream, emu *emulator.Emulator, cfg Config, tables []normalize.Table) (*normalize.Bridge, normalize.Resume, error) {
	if len(tables) == 0 {
		return nil, normalize.Resume{}, errors.New("adapter: no physical tables to mirror")
	}
	cfg = cfg.withDefaults()
	if err := cfg.prepareMemory(); err != nil {
		return nil, normalize.Resume{}, err
	}
	rp, err := openResumePoint(ctx, up, cfg.sink(emu), resumeConfig{StartTs: cfg.StartTs, ClientID: cfg.ClientID, Bridge: cfg.Bridge}, tables)
	if err != nil {
		return nil, normalize.Resume{}, err
	}
	return rp.bridge, rp.resume, nil
}

// TableStarts is each table's own start: its partition's stored progress
// where it is above the resume point (M55). The resume point is the
// minimum over the partitions; a partition already past it (a table
// created by a table-set change whose schema request was stored before a
// crash, while the other tables' progress was not yet past the change)
// starts at its own progress, where its table exists.
func TableStarts(res normalize.Resume, ks uint32, tables []normalize.Table) map[int64]uint64 {
	out := map[int64]uint64{}
	for _, t := range tables {
		if st := res.Stored[normalize.PartitionName(ks, t.PhysicalID)]; st.GetResolvedTs() > res.StartTs {
			out[t.PhysicalID] = st.GetResolvedTs()
		}
	}
	return out
}

// LiveCallbacks is Start's callback chain for a host that starts the
// runtime itself: tap (cfg.Tap, optional) → bridge, behind the live table
// set (specs/tableset.md LT1-LT5) that changes the runtime's tables in
// place. attach must be called with the runtime once it started.
func LiveCallbacks(up *Upstream, bridge *normalize.Bridge, cfg Config, tables []normalize.Table) (cb minicdc.Callback, attach func(*minicdc.Runtime)) {
	live := newLiveSet(callbacks(bridge, cfg.Tap, nil), bridge, up, cfg.Filter, cfg.Log, tables)
	return live, live.attach
}
