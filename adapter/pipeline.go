// Package adapter wires the whole sfemu data path: an upstream (the
// embedded fake cluster with its SQL front, read in process or over its
// PD/TiKV gRPC servers, or a real TiDB cluster through PD), the schema
// store, the Mini-CDC runtime with the mounter, the normalize bridge and
// the emulator. `sfemu run` and the end-to-end tests build the same
// pipeline through it. Rules: specs/sfemu-run.md (SR*).
package adapter

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/searchfabric/sfemu/emulator"
	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/normalize"
	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/mounter"
	"github.com/searchfabric/sfemu/upstream/pd"
	"github.com/searchfabric/sfemu/upstream/schemastore"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
	"github.com/searchfabric/sfemu/verify"
)

// TableRef names an upstream table and its collection. It is the
// consistency checker's type, so a configured table set is checked as is.
type TableRef = verify.TableRef

// Config configures Start.
type Config struct {
	// DataDir holds the schema store (DataDir/schemastore).
	DataDir string
	// Tables are the mirrored tables; every physical partition of a
	// partitioned table is one table path.
	Tables []TableRef
	// ClientID identifies the adapter to the emulator. Default "sfemu".
	ClientID string
	// DDLPollLimit is the trigger-DDL batch size. Default 64.
	DDLPollLimit int
	// Runtime tunes the Mini-CDC runtime.
	Runtime minicdc.Options
	// Bridge tunes the normalize bridge; ClientID, StartTs and Tables are
	// filled in by Start.
	Bridge normalize.Config
	// SourcePoll is the in-process sources' pump interval. Default 5 ms.
	SourcePoll time.Duration
	// StartTs is where a partition without stored progress starts (0 =
	// the upstream's current ts). Changes committed after it are
	// delivered; the tables must exist at it.
	StartTs uint64
	// Tap, when set, sees every callback before the bridge does (tests
	// use it to observe order and decoding); an error it returns is the
	// callback's error.
	Tap minicdc.Callback
	// WrapSink, when set, wraps the emulator as the bridge's sink (tests
	// use it to observe batches and progress).
	WrapSink func(normalize.Sink) normalize.Sink
	// GC tunes the service GC safe point the adapter holds at its
	// checkpoint when it reads through PD (ModeWire, ModeReal).
	// ServiceID defaults to "sfemu-" + ClientID.
	GC pd.ServiceSafePointConfig
}

// tapped calls tap, then next.
type tapped struct{ tap, next minicdc.Callback }

func (t tapped) OnRowChanged(ctx context.Context, ev minicdc.RowChanged) error {
	if err := t.tap.OnRowChanged(ctx, ev); err != nil {
		return err
	}
	return t.next.OnRowChanged(ctx, ev)
}

func (t tapped) OnDDL(ctx context.Context, ev minicdc.DDLOutput) error {
	if err := t.tap.OnDDL(ctx, ev); err != nil {
		return err
	}
	return t.next.OnDDL(ctx, ev)
}

func (t tapped) OnCheckpoint(ctx context.Context, cp minicdc.Checkpoint) error {
	if err := t.tap.OnCheckpoint(ctx, cp); err != nil {
		return err
	}
	return t.next.OnCheckpoint(ctx, cp)
}

// Adapter is a running Mini-CDC adapter feeding an emulator.
type Adapter struct {
	RT     *minicdc.Runtime
	Bridge *normalize.Bridge
	Resume normalize.Resume
	Tables []normalize.Table

	// GC is the service GC safe point held at the checkpoint (nil in
	// process).
	GC *pd.ServiceSafePoint

	storeSrc    kvevent.Source
	storeCancel context.CancelFunc
	storeDone   chan error

	gcHold *pd.Hold

	closeOnce sync.Once
	closeErr  error
}

// Start resolves the tables, opens the bridge (resume point and
// epoch from the emulator's stored progress), opens the schema store and
// starts the Mini-CDC runtime from the resume point.
//
// The schema store follows the DDL job span through its own source
// (Upstream.NewSource), delivered on its own goroutine: the runtime's rows
// wait for the store to reach commit_ts-1 (specs/minicdc.md M22), and a
// source delivers all of its spans from one goroutine, so sharing it would
// make that wait wait for itself. Over PD the adapter holds a service GC
// safe point at its checkpoint (SR2).
func Start(ctx context.Context, up *Upstream, emu *emulator.Emulator, cfg Config) (*Adapter, error) {
	if len(cfg.Tables) == 0 {
		return nil, errors.New("adapter: no tables to mirror")
	}
	if cfg.ClientID == "" {
		cfg.ClientID = "sfemu"
	}
	if cfg.DDLPollLimit <= 0 {
		cfg.DDLPollLimit = 64
	}
	tables, err := resolveTables(ctx, up, cfg.Tables, cfg.StartTs)
	if err != nil {
		return nil, err
	}
	var sink normalize.Sink = emu
	if cfg.WrapSink != nil {
		// The same view of the emulator the bridge gets.
		sink = cfg.WrapSink(sink)
	}
	if tables, err = alignWithMapped(ctx, up, sink, cfg.Bridge.KeyspaceID, cfg.Tables, tables); err != nil {
		return nil, err
	}
	return startWithTables(ctx, up, emu, cfg, tables)
}

// alignWithMapped makes a cold start survive a stop in the middle of a
// table-set change (SR10). The table set resolved from the upstream's
// catalog is what the tables are now; a collection whose adapter stopped
// before it handled a TRUNCATE or partition DDL (or after only some of
// that change's schema requests were acknowledged) maps other physical
// tables, and the bridge refuses to open over them. For such a
// collection the table set is the partitions it maps, with the table's
// schema read at their stored progress (at the collection's last schema
// change when nothing is stored): the runtime then replays the change
// from the stored progress and the supervisor follows it, as without
// the stop. A collection that does not exist yet, or maps exactly the
// resolved tables, is left alone.
func alignWithMapped(ctx context.Context, up *Upstream, sink normalize.Sink, ks uint32, refs []TableRef, tables []normalize.Table) ([]normalize.Table, error) {
	list, err := sink.ListCollections(ctx, &apiv1.ListCollectionsRequest{})
	if err != nil {
		return nil, fmt.Errorf("adapter: listing collections: %w", err)
	}
	byName := map[string]*apiv1.CollectionStatus{}
	for _, st := range list.GetCollections() {
		if st.GetState() != apiv1.CollectionState_COLLECTION_STATE_DROPPED {
			byName[st.GetDefinition().GetName()] = st
		}
	}
	var out []normalize.Table
	for _, ref := range refs {
		var resolved []normalize.Table
		for _, t := range tables {
			if t.Database == ref.DB && t.Info != nil && strings.EqualFold(t.Info.Name.O, ref.Table) {
				resolved = append(resolved, t)
			}
		}
		st := byName[ref.CollectionName()]
		mapped := st.GetDefinition().GetSourcePartitions()
		if st == nil || len(mapped) == 0 || samePartitions(ks, mapped, resolved) {
			out = append(out, resolved...)
			continue
		}
		ids := make([]int64, 0, len(mapped))
		for _, name := range mapped {
			_, id, err := apiv1.ParsePartitionName(name)
			if err != nil {
				return nil, fmt.Errorf("adapter: collection %q maps partition %q: %w", ref.CollectionName(), name, err)
			}
			ids = append(ids, id)
		}
		prog, err := sink.GetProgress(ctx, &apiv1.GetProgressRequest{SourcePartitions: mapped})
		if err != nil {
			return nil, fmt.Errorf("adapter: collection %q: reading stored progress: %w", ref.CollectionName(), err)
		}
		ts := st.GetLineage().GetLastDdlCommitTs()
		for _, ps := range prog.GetPartitions() {
			ts = max(ts, ps.GetResolvedTs())
		}
		if ts == 0 {
			return nil, fmt.Errorf("adapter: collection %q maps %v, not the physical tables of %s now, and has no stored progress or schema change to read the table at",
				ref.CollectionName(), mapped, ref)
		}
		ti, dbID, err := schemastore.LookupTable(ctx, up.Snapshot(), ts, ref.DB, ref.Table)
		if err != nil {
			return nil, fmt.Errorf("adapter: collection %q maps %v, not the physical tables of %s now; reading the table at its stored progress %d: %w",
				ref.CollectionName(), mapped, ref, ts, err)
		}
		for _, id := range ids {
			out = append(out, normalize.Table{PhysicalID: id, SchemaID: dbID, Database: ref.DB, Info: ti, Collection: ref.Collection})
		}
	}
	return out, nil
}

// unreportedSince finds collections of the table set that exist but hold
// partitions without stored progress: the emulator leaves the partitions
// of a collection's creation unreported (E29) until the adapter's first
// checkpoint, so a process that stopped before it (a crash in the first
// moments of a run) left rows committed after the creation that nothing
// records. It returns the earliest such creation ts (0: none), where the
// run must start instead of now (SR11).
func unreportedSince(ctx context.Context, sink normalize.Sink, bcfg normalize.Config, tables []normalize.Table) (uint64, error) {
	nameOf := bcfg.CollectionName
	if nameOf == nil {
		nameOf = normalize.DefaultCollectionName
	}
	parts := map[string][]string{}
	var all []string
	for _, t := range tables {
		name := t.Collection
		if name == "" && t.Info != nil {
			name = nameOf(t.Database, t.Info.Name.L)
		}
		pn := normalize.PartitionName(bcfg.KeyspaceID, t.PhysicalID)
		parts[name] = append(parts[name], pn)
		all = append(all, pn)
	}
	list, err := sink.ListCollections(ctx, &apiv1.ListCollectionsRequest{})
	if err != nil {
		return 0, fmt.Errorf("adapter: listing collections: %w", err)
	}
	prog, err := sink.GetProgress(ctx, &apiv1.GetProgressRequest{SourcePartitions: all})
	if err != nil {
		return 0, fmt.Errorf("adapter: reading stored progress: %w", err)
	}
	stored := map[string]bool{}
	for _, ps := range prog.GetPartitions() {
		if ps.GetResolvedTs() > 0 {
			stored[ps.GetSourcePartition()] = true
		}
	}
	var since uint64
	for _, st := range list.GetCollections() {
		if st.GetState() == apiv1.CollectionState_COLLECTION_STATE_DROPPED {
			continue
		}
		created := st.GetLineage().GetLastDdlCommitTs()
		if created == 0 || st.GetLineage().GetLastUpdatePolicy() != apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_INITIAL_CREATION {
			continue
		}
		for _, pn := range parts[st.GetDefinition().GetName()] {
			if !stored[pn] {
				if since == 0 || created < since {
					since = created
				}
				break
			}
		}
	}
	return since, nil
}

// samePartitions reports whether a collection's mapped partitions are
// exactly the physical tables resolved.
func samePartitions(ks uint32, mapped []string, resolved []normalize.Table) bool {
	if len(mapped) != len(resolved) {
		return false
	}
	have := map[string]bool{}
	for _, name := range mapped {
		have[name] = true
	}
	for _, t := range resolved {
		if !have[normalize.PartitionName(ks, t.PhysicalID)] {
			return false
		}
	}
	return true
}

// resolveTables finds the physical tables of refs: every physical
// partition of a table is one path (M47). In process they come from the
// SQL front's current catalog; over the wire (embedded or real) from the
// meta keys at ts (0 = the upstream's current ts) read by snapshot, the
// way a real cluster is read (SR1).
func resolveTables(ctx context.Context, up *Upstream, refs []TableRef, ts uint64) ([]normalize.Table, error) {
	viaCatalog := up.Mode() == ModeInProcess && up.SQL != nil
	if !viaCatalog {
		if ts == 0 {
			var err error
			if ts, err = up.CurrentTs(ctx); err != nil {
				return nil, fmt.Errorf("adapter: resolving tables: current ts: %w", err)
			}
		}
	}
	var tables []normalize.Table
	for _, ref := range refs {
		var ti *model.TableInfo
		var dbID int64
		var err error
		if viaCatalog {
			ti, dbID, err = up.SQL.TableInfo(ref.DB, ref.Table)
		} else {
			ti, dbID, err = schemastore.LookupTable(ctx, up.Snapshot(), ts, ref.DB, ref.Table)
		}
		if err != nil {
			return nil, fmt.Errorf("adapter: table %s: %w", ref, err)
		}
		for _, phys := range ti.PhysicalIDs() {
			// An explicit collection binds the table (a renamed table keeps
			// feeding it); otherwise Bridge.CollectionName decides.
			tables = append(tables, normalize.Table{PhysicalID: phys, SchemaID: dbID, Database: ref.DB, Info: ti, Collection: ref.Collection})
		}
	}
	return tables, nil
}

// startWithTables starts an adapter over a resolved table set.
func startWithTables(ctx context.Context, up *Upstream, emu *emulator.Emulator, cfg Config, tables []normalize.Table) (*Adapter, error) {
	if len(tables) == 0 {
		return nil, errors.New("adapter: no physical tables to mirror")
	}
	if cfg.ClientID == "" {
		cfg.ClientID = "sfemu"
	}
	if cfg.DDLPollLimit <= 0 {
		cfg.DDLPollLimit = 64
	}
	ids := make([]int64, len(tables))
	for i, t := range tables {
		ids[i] = t.PhysicalID
	}
	now := cfg.StartTs
	if now == 0 {
		var err error
		if now, err = up.CurrentTs(ctx); err != nil {
			return nil, err
		}
	}
	bcfg := cfg.Bridge
	var sink normalize.Sink = emu
	if cfg.WrapSink != nil {
		sink = cfg.WrapSink(sink)
	}
	if cfg.StartTs == 0 {
		created, err := unreportedSince(ctx, sink, bcfg, tables)
		if err != nil {
			return nil, err
		}
		if created > 0 {
			now = min(now, created)
		}
	}
	bcfg.ClientID, bcfg.StartTs, bcfg.Tables = cfg.ClientID, now, tables
	bridge, err := normalize.New(bcfg, sink)
	if err != nil {
		return nil, err
	}
	resume, err := bridge.Open(ctx)
	if err != nil {
		return nil, err
	}

	// Over PD, hold the service GC safe point at the resume point before
	// anything reads history: a start ts GC already passed fails here,
	// naming both (P4).
	var hold *pd.Hold
	if up.PD != nil {
		gcfg := cfg.GC
		if gcfg.ServiceID == "" {
			gcfg.ServiceID = "sfemu-" + cfg.ClientID
		}
		keeper, err := up.PD.HoldGC(ctx, gcfg, resume.StartTs)
		if err != nil {
			return nil, fmt.Errorf("adapter: start ts %d: %w", resume.StartTs, err)
		}
		hold = pd.StartHold(keeper)
	}
	// A start that fails after the hold was set keeps it when the emulator
	// has stored progress (a previous run's; the hold now protects it, as
	// after a fatal stop) and removes it otherwise (nothing depends on it).
	fail := func(err error) (*Adapter, error) {
		if hold != nil {
			_ = hold.Stop(len(resume.Stored) == 0)
		}
		return nil, err
	}

	storeSrc, err := up.NewSource(cfg.SourcePoll)
	if err != nil {
		return fail(err)
	}
	store, err := schemastore.New(schemastore.Config{
		Dir: filepath.Join(cfg.DataDir, "schemastore"), Snapshot: up.Snapshot(), Source: storeSrc, InitialTs: resume.StartTs,
	})
	if err != nil {
		_ = storeSrc.Close()
		return fail(err)
	}
	sctx, scancel := context.WithCancel(context.Background())
	a := &Adapter{Bridge: bridge, Resume: resume, Tables: tables, storeSrc: storeSrc, storeCancel: scancel, storeDone: make(chan error, 1), gcHold: hold}
	if hold != nil {
		a.GC = hold.SafePoint()
	}
	go func() { a.storeDone <- storeSrc.Run(sctx) }()

	var cb minicdc.Callback = bridge
	if cfg.Tap != nil {
		cb = tapped{tap: cfg.Tap, next: bridge}
	}
	if hold != nil {
		cb = gcCallback{next: cb, hold: hold}
	}
	tableSrc, err := up.NewSource(cfg.SourcePoll)
	if err != nil {
		_ = store.Close()
		_ = a.stopStoreSource()
		return fail(err)
	}
	rt, err := minicdc.Start(ctx, minicdc.StartConfig{StartTs: resume.StartTs, TableIDs: ids, DDLPollLimit: cfg.DDLPollLimit},
		minicdc.Deps{
			Clock:       up.Clock(),
			SchemaStore: store,
			Source:      tableSrc,
			NewDecoder: func(int64) (minicdc.RowDecoder, error) {
				return mounter.New(mounter.Config{RequireOldValue: true}), nil
			},
			TableSpan: func(ks uint32, nextGen bool, id int64) (kvevent.Span, error) {
				return tablecodec.TableRecordSpan(ks, nextGen, id), nil
			},
		}, cb, cfg.Runtime)
	if err != nil {
		_ = a.stopStoreSource()
		return fail(err)
	}
	a.RT = rt
	return a, nil
}

func (a *Adapter) stopStoreSource() error {
	a.storeCancel()
	err := <-a.storeDone
	if cerr := a.storeSrc.Close(); err == nil {
		err = cerr
	}
	return err
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
		err := a.RT.Close()
		if serr := a.stopStoreSource(); err == nil && serr != nil {
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
