package adapter

// Startup phase 0, the initial snapshot (specs/sfemu-run.md SN1-SN12):
// pick S from the upstream's clock, hold GC at S first, read every
// configured table's rows at S, ingest them into the tables' own
// partitions (normalize N41-N44), then start the stream at S. The plan and
// its progress are saved in DataDir/snapshot.json, written before any
// collection is created, so a stop anywhere resumes (same S while GC has
// not passed it) instead of starting the stream with a gap.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/searchfabric/sfemu/emulator"
	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/memquota"
	"github.com/searchfabric/sfemu/normalize"
	"github.com/searchfabric/sfemu/snapshot"
	"github.com/searchfabric/sfemu/upstream/pd"
)

// snapshotStatePath is where the state lives ("" without a data dir: kept
// in memory only, so a stop restarts the snapshot).
func snapshotStatePath(dataDir string) string {
	if dataDir == "" {
		return ""
	}
	return filepath.Join(dataDir, snapshot.FileName)
}

// startWithSnapshot runs or resumes the initial snapshot when cfg asks
// for one (SN1) and then starts the stream at S. ok is false when no
// snapshot applies; the caller then starts as without one.
func startWithSnapshot(ctx context.Context, up *Upstream, emu *emulator.Emulator, cfg Config) (a *Adapter, ok bool, err error) {
	path := snapshotStatePath(cfg.DataDir)
	var st *snapshot.State
	if path != "" {
		if st, err = snapshot.Load(path); err != nil {
			return nil, true, fmt.Errorf("adapter: %w", err)
		}
	}
	mode := cfg.Snapshot.Mode
	if cfg.StartTs != 0 && mode != SnapshotNever {
		// An explicit start ts asks for the stream from there (SN1).
		mode = SnapshotNever
	}
	if mode == SnapshotNever {
		if st != nil && !st.Complete {
			return nil, true, fmt.Errorf("adapter: the snapshot at ts %d stored in %s is not complete: the stream cannot start without it (run with snapshot mode auto to finish it, or always to redo it)", st.Ts, path)
		}
		return nil, false, nil
	}
	if len(cfg.Tables) == 0 && st == nil {
		// An empty start set (LT8) has no rows at S: every table joins
		// by its CREATE TABLE, empty, and is followed from there.
		return nil, false, nil
	}
	cfg = cfg.withDefaults()
	sink := cfg.sink(emu)
	sc := cfg.Snapshot
	logw := sc.Log
	if logw == nil {
		logw = io.Discard
	}
	if cfg.Memory.Quota == nil {
		q, err := memquota.New("memory-quota", DefaultMemoryQuota)
		if err != nil {
			return nil, true, err
		}
		cfg.Memory.Quota = q
	}
	names := collectionNames(cfg.Tables)
	var drop bool
	switch {
	case mode == SnapshotAlways:
		drop, st = true, nil
	case st != nil && st.Complete:
		return nil, false, nil
	case st == nil:
		active, err := activeCollections(ctx, sink, names)
		if err != nil {
			return nil, true, err
		}
		if len(active) > 0 {
			// Not a fresh data dir: the collections resume from their
			// stored progress (SN1).
			return nil, false, nil
		}
	default:
		if !sameTableSet(st, cfg.Tables) {
			return nil, true, fmt.Errorf("adapter: the snapshot at ts %d stored in %s covers tables %s, not the configured %s: finish it with the same tables (or use snapshot mode always)",
				st.Ts, path, stateTableNames(st), strings.Join(refStrings(cfg.Tables), ","))
		}
	}

	// S and the GC hold at S come first (SN1); a resumed snapshot keeps
	// its S while GC has not passed it (SN7).
	var s uint64
	var hold *pd.Hold
	if st != nil {
		s = st.Ts
		gcsp, err := up.Snapshot().GCSafePoint(ctx)
		if err != nil {
			return nil, true, fmt.Errorf("adapter: snapshot: reading the GC safe point: %w", err)
		}
		why := ""
		if s < gcsp {
			why = fmt.Sprintf("the GC safe point %d passed it", gcsp)
		} else if hold, err = holdGC(ctx, up, cfg.GC, s); errors.Is(err, pd.ErrStartTsBeforeGC) {
			why = err.Error()
		} else if err != nil {
			return nil, true, err
		}
		if why != "" {
			fmt.Fprintf(logw, "sfemu: the snapshot at ts %d of %s cannot resume: %s (its GC hold expired while the adapter was stopped); dropping collections %s and restarting their snapshot at a new ts\n",
				s, stateTableNames(st), why, strings.Join(names, ","))
			drop, st = true, nil
		}
	}
	if st == nil {
		if s, err = up.CurrentTs(ctx); err != nil {
			return nil, true, fmt.Errorf("adapter: snapshot ts: %w", err)
		}
		if hold, err = holdGC(ctx, up, cfg.GC, s); err != nil {
			return nil, true, err
		}
	}
	// Until the stream's own hold takes over, a failure keeps the hold
	// when there is a state to resume (the next start needs S), else
	// removes it.
	keepHold := func() bool { return st != nil }
	fail := func(err error) (*Adapter, bool, error) {
		if hold != nil {
			_ = hold.Stop(!keepHold())
		}
		return nil, true, err
	}
	if drop {
		if err := dropCollections(ctx, sink, names, s, cfg.ClientID); err != nil {
			return fail(err)
		}
	}
	tables, err := resolveTablesAt(ctx, up, cfg.Tables, s)
	if err != nil {
		return fail(err)
	}
	if st == nil {
		plan := &snapshot.State{Version: snapshot.StateVersion, Ts: s}
		for _, t := range tables {
			rs, err := planSplitRanges(ctx, up, t.table.PhysicalID, s, sc.Concurrency)
			if err != nil {
				return fail(err)
			}
			plan.Tables = append(plan.Tables, snapshot.Table{Name: t.name, Collection: collectionOf(cfg, t), PhysicalID: t.table.PhysicalID, Ranges: rs})
		}
		// Saved before any collection exists (SN6): a stop from here on
		// resumes the snapshot instead of streaming from a bare S.
		if err := saveState(path, plan); err != nil {
			return fail(err)
		}
		st = plan
	} else if err := matchPlan(st, tables); err != nil {
		return fail(err)
	}

	ntables := make([]normalize.Table, len(tables))
	for i, t := range tables {
		ntables[i] = t.table
	}
	// The collections are created at S (N30) and the epoch fixed (N4) by
	// a bridge that never streams: the stream's own bridge opens after
	// the snapshot and takes the next epoch (N42).
	rp, err := openResumePoint(ctx, up, sink, resumeConfig{StartTs: s, ClientID: cfg.ClientID, Bridge: cfg.Bridge}, ntables)
	if err != nil {
		return fail(err)
	}
	_ = rp.bridge.Release()
	st.Epoch = rp.resume.Epoch
	w, err := newSnapWriter(ctx, sink, cfg.Bridge, tables, s, st.Epoch)
	if err != nil {
		return fail(err)
	}
	prog := sc.Progress
	if prog == nil {
		prog = &snapshot.Progress{}
	}
	fmt.Fprintf(logw, "sfemu: snapshot of %s at ts %d (epoch %d, %d ranges pending, concurrency %d)\n",
		stateTableNames(st), s, st.Epoch, len(st.Pending()), max(sc.Concurrency, 0))
	stopLog := logProgress(prog, logw, sc.LogEvery, cfg.Phase)
	rctx, cancel := context.WithCancel(ctx)
	if sc.Stop != nil {
		go func() {
			select {
			case <-sc.Stop:
				cancel()
			case <-rctx.Done():
			}
		}()
	}
	err = snapshot.Run(rctx, st, snapshot.Config{
		Reader: up.Snapshot(), Writer: w, Concurrency: sc.Concurrency, ChunkRows: sc.ChunkRows, Quota: cfg.Memory.Quota,
		Save: func(st *snapshot.State) error { return saveState(path, st) }, Progress: prog, AfterChunk: sc.AfterChunk,
	})
	cancel()
	stopLog(err == nil)
	if err != nil {
		return fail(fmt.Errorf("adapter: snapshot at ts %d: %w", s, err))
	}
	st.Complete = true
	if err := saveState(path, st); err != nil {
		return fail(err)
	}
	// The stream's hold takes over at S (startWithTables registers it).
	if hold != nil {
		if err := hold.Stop(false); err != nil {
			return nil, true, err
		}
	}
	cfg.StartTs = s
	a, err = startWithTables(ctx, up, emu, cfg, ntables)
	if err == nil && cfg.Phase != nil {
		cfg.Phase.Streaming()
	}
	return a, true, err
}

// phaseOf sums the tables' ranges into one phase progress (SR13).
func phaseOf(tables []snapshot.TableProgress) PhaseProgress {
	ph := PhaseProgress{Unit: "ranges"}
	var names []string
	for _, t := range tables {
		names = append(names, t.Table)
		ph.Done += float64(t.RangesDone)
		ph.Total += float64(t.RangesTotal)
	}
	ph.What = "snapshot of " + strings.Join(names, ", ")
	return ph
}

func saveState(path string, st *snapshot.State) error {
	if path == "" {
		return nil
	}
	return snapshot.Save(path, st)
}

// collectionOf is the collection t is mirrored into (N3).
func collectionOf(cfg Config, t snapTable) string {
	if t.table.Collection != "" {
		return t.table.Collection
	}
	nameOf := cfg.Bridge.CollectionName
	if nameOf == nil {
		nameOf = normalize.DefaultCollectionName
	}
	return nameOf(t.table.Database, t.table.Info.Name.L)
}

func collectionNames(refs []TableRef) []string {
	var out []string
	for _, r := range refs {
		if !slices.Contains(out, r.CollectionName()) {
			out = append(out, r.CollectionName())
		}
	}
	return out
}

func refStrings(refs []TableRef) []string {
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r.String()
	}
	return out
}

func stateTableNames(st *snapshot.State) string {
	var out []string
	for _, t := range st.Tables {
		if !slices.Contains(out, t.Name) {
			out = append(out, t.Name)
		}
	}
	return strings.Join(out, ",")
}

// sameTableSet reports whether the state was planned for refs.
func sameTableSet(st *snapshot.State, refs []TableRef) bool {
	have := map[string]bool{}
	for _, t := range st.Tables {
		have[strings.ToLower(t.Name)] = true
	}
	if len(have) != len(refs) {
		return false
	}
	for _, r := range refs {
		if !have[strings.ToLower(r.String())] {
			return false
		}
	}
	return true
}

// matchPlan checks that the tables resolved at S are the state's.
func matchPlan(st *snapshot.State, tables []snapTable) error {
	if len(st.Tables) != len(tables) {
		return fmt.Errorf("adapter: the snapshot at ts %d planned %d physical tables, %d resolve at it", st.Ts, len(st.Tables), len(tables))
	}
	for i, t := range tables {
		if st.Tables[i].PhysicalID != t.table.PhysicalID {
			return fmt.Errorf("adapter: the snapshot at ts %d planned physical table %d of %s, table %s resolves to %d at it",
				st.Ts, st.Tables[i].PhysicalID, st.Tables[i].Name, t.name, t.table.PhysicalID)
		}
	}
	return nil
}

// activeCollections lists which of names exist and are not dropped.
func activeCollections(ctx context.Context, sink normalize.Sink, names []string) ([]*apiv1.CollectionStatus, error) {
	list, err := sink.ListCollections(ctx, &apiv1.ListCollectionsRequest{})
	if err != nil {
		return nil, fmt.Errorf("adapter: listing collections: %w", err)
	}
	var out []*apiv1.CollectionStatus
	for _, st := range list.GetCollections() {
		if st.GetState() != apiv1.CollectionState_COLLECTION_STATE_DROPPED && slices.Contains(names, st.GetDefinition().GetName()) {
			out = append(out, st)
		}
	}
	return out, nil
}

// dropCollections retires the named collections that exist (E30) at ts,
// so a snapshot at ts starts them over: rows a partial snapshot at an
// older ts left behind, or a previous mirror's, would otherwise survive
// upstream deletes between the two (SN7, SN10).
func dropCollections(ctx context.Context, sink normalize.Sink, names []string, ts uint64, clientID string) error {
	active, err := activeCollections(ctx, sink, names)
	if err != nil {
		return err
	}
	for _, st := range active {
		name := st.GetDefinition().GetName()
		lin := st.GetLineage()
		req := &apiv1.PutCollectionSchemaRequest{
			Meta:          &apiv1.RequestMeta{IdempotencyKey: fmt.Sprintf("snapshot-restart/%s/%d", name, ts), ClientId: clientID, ClientKind: apiv1.ClientKind_CLIENT_KIND_TIDB_DDL_ADAPTER},
			Scope:         &apiv1.SchemaScope{Collection: name, DdlCommitTs: max(ts, lin.GetLastDdlCommitTs())},
			SchemaVersion: lin.GetSchemaVersion() + 1,
			Fence:         &apiv1.SchemaFence{ExpectedPrevSchemaVersion: lin.GetSchemaVersion(), SchemaGenerationToken: lin.GetSchemaGenerationToken(), EnforceMonotonicApply: true},
			UpdatePolicy:  apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_DROP,
		}
		if _, err := sink.PutCollectionSchema(ctx, req); err != nil {
			return fmt.Errorf("adapter: snapshot at ts %d: dropping collection %q to start it over: %w", ts, name, err)
		}
	}
	return nil
}

// logProgress writes one line per table every every (default 5 s) while
// the snapshot runs, and tells phase (when set) the ranges read of the
// ranges planned every second; stop writes the final lines when done.
func logProgress(p *snapshot.Progress, w io.Writer, every time.Duration, phase PhaseHook) (stop func(done bool)) {
	if every <= 0 {
		every = 5 * time.Second
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		sec := time.NewTicker(time.Second)
		defer sec.Stop()
		report := func(now time.Time) {
			if phase != nil {
				phase.Snapshotting(phaseOf(p.Report(now)))
			}
		}
		report(time.Now())
		for {
			select {
			case <-quit:
				return
			case now := <-sec.C:
				report(now)
			case now := <-t.C:
				for _, tp := range p.Report(now) {
					fmt.Fprintln(w, "sfemu: "+tp.Line())
				}
			}
		}
	}()
	return func(done bool) {
		close(quit)
		wg.Wait()
		if done {
			for _, tp := range p.Report(time.Now()) {
				fmt.Fprintln(w, "sfemu: "+tp.Line())
			}
		}
	}
}
