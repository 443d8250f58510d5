package normalize

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/reorder"
)

// Defaults (N9, N13, N21).
const (
	DefaultMaxUnsealedRows    = 100_000
	DefaultMaxUnsealedBytes   = 64 << 20
	DefaultBackpressureWindow = 5 * time.Second
	DefaultMaxBatchRows       = 8192
	DefaultMaxBatchBytes      = 8 << 20
)

// ErrReorderOverflow marks the terminal overflow of a partition's reorder
// buffer (N13). Errors returned for it also match the runtime's sentinel
// (see overflowError).
var ErrReorderOverflow = errors.New("normalize: reorder buffer overflow")

// Table is one configured table path with the schema it has at StartTs.
type Table struct {
	// PhysicalID is the path's physical table id (a partition id for a
	// partitioned table).
	PhysicalID int64
	// SchemaID and Database name the table's database.
	SchemaID int64
	Database string
	// Info is the logical table's schema at StartTs (the partitioned table
	// for a partition). Read at Open only.
	Info *minicdc.TableInfo
	// Collection, when set, is the collection the table is mirrored into,
	// overriding Config.CollectionName (N3). A restart after a table-set
	// change (N34) sets it so the binding made by the first run survives
	// renames.
	Collection string
}

// Config configures a Bridge.
type Config struct {
	// ClientID identifies this adapter instance (meta.client_id). Required.
	ClientID string
	// KeyspaceID is set in next-gen (keyspace) mode (N1).
	KeyspaceID uint32
	// StartTs is the Mini-CDC start ts of this run (use ResumePoint) and
	// the ddl_commit_ts of bootstrap requests (N30). Must be > 0.
	StartTs uint64
	// Tables are the configured table paths.
	Tables []Table
	// CollectionName maps a table to its collection (N3); nil uses
	// DefaultCollectionName.
	CollectionName func(db, table string) string
	// Roles overrides field roles per collection and column (N18).
	Roles map[string]RoleOverrides
	// DisableMetadataAux turns the metadata_aux modality off (N18).
	DisableMetadataAux bool

	MaxUnsealedRows    int
	MaxUnsealedBytes   int64
	BackpressureWindow time.Duration
	// Timer is the clock of the backpressure wait; nil uses wall time.
	Timer reorder.Timer
	// MaxBatchRows caps a MutationBatch (N21).
	MaxBatchRows int
	// MaxBatchBytes caps the estimated encoded size of a MutationBatch
	// (N21); a batch holds at least one mutation.
	MaxBatchBytes int64
	// Spill sets the shared memory quota and the spill directory (RS1).
	Spill SpillConfig
}

func (c *Config) withDefaults() (Config, error) {
	out := *c
	if out.ClientID == "" {
		return out, fmt.Errorf("normalize: Config.ClientID is required")
	}
	if out.StartTs == 0 {
		return out, fmt.Errorf("normalize: Config.StartTs must be > 0")
	}
	if len(out.Tables) == 0 {
		return out, fmt.Errorf("normalize: Config.Tables is empty")
	}
	if out.CollectionName == nil {
		out.CollectionName = DefaultCollectionName
	}
	if out.MaxUnsealedRows == 0 && out.Spill.Memory == nil {
		out.MaxUnsealedRows = DefaultMaxUnsealedRows
	}
	if out.MaxUnsealedBytes == 0 && out.Spill.Memory == nil {
		out.MaxUnsealedBytes = DefaultMaxUnsealedBytes
	}
	if out.BackpressureWindow == 0 {
		out.BackpressureWindow = DefaultBackpressureWindow
	}
	if out.Timer == nil {
		out.Timer = reorder.RealTimer{}
	}
	if out.MaxBatchRows <= 0 {
		out.MaxBatchRows = DefaultMaxBatchRows
	}
	if out.MaxBatchBytes <= 0 {
		out.MaxBatchBytes = DefaultMaxBatchBytes
	}
	return out, nil
}

// partition is one table path's state.
type partition struct {
	tableID int64
	name    string
	coll    *collection
	buf     *reorder.Waiter[Mutation]

	// Row path (the path's delivery goroutine only).
	copier  rowCopier
	shapes  shapeCache
	preRow  runtimeRow
	postRow runtimeRow
	// skip is the stored resolved ts at open: rows at or below it are
	// acknowledged data (N20). Immutable after Open.
	skip uint64

	// Control path (under Bridge.ctl).
	seq      seqCounter
	advanced uint64 // last resolved ts stored for the partition
	lastCP   uint64 // last checkpoint value seen
	retired  bool   // removed from its collection by a DDL
	// added marks a partition a DDL of this run mapped (add partition,
	// the new id of a truncated table or partition): this run's runtime
	// does not subscribe it, so it gets no rows and reports nothing until
	// the adapter restarts with the new table set (N34).
	added       bool
	drained     []reorder.Item[Mutation]
	cuts        []int
	alloc       protoAlloc
	stateInSink bool          // the emulator holds stream state for it
	rows        atomic.Uint64 // rows buffered since Open
	ingested    uint64        // mutations acknowledged since Open
}

// collection is one target collection and the lineage the bridge knows.
type collection struct {
	name      string
	schemaID  int64
	logicalID int64
	// info is the logical table's latest known schema (Config.Tables,
	// then each DDL's post-DDL table): the schema a restart after a
	// table-set change starts from (N34). Immutable (minicdc.TableInfo).
	info       *minicdc.TableInfo
	source     SourceInfo
	partitions []*partition // sorted by name
	roles      RoleOverrides

	active  bool
	def     *apiv1.CollectionDefinition
	version uint64
	token   string
	lastDDL uint64
	// lastJobs are the DDL jobs this run applied at lastDDL: several events
	// may share one FinishedTs (SS44). Empty when lastDDL came from the
	// emulator's lineage (restart).
	lastJobs map[int64]bool
	pending  map[string]*apiv1.PutCollectionSchemaRequest // sent, not yet acknowledged (N28)
}

// Bridge implements minicdc.Callback on top of a Sink (specs/normalization.md).
// OnRowChanged may run concurrently for different tables; OnDDL and
// OnCheckpoint are serialized internally.
type Bridge struct {
	cfg  Config
	sink Sink

	byID        map[int64]*partition
	parts       []*partition // sorted by name
	collections []*collection

	ctl    sync.Mutex
	opened bool
	// ready is opened for the row path, which does not take ctl.
	ready  atomic.Bool
	resume Resume
	// tableSet is the table-set change found by a DDL and not yet
	// reported (N35): it is returned once the whole FinishedTs group of
	// that DDL was delivered. Under ctl.
	tableSet *TableSetChangedError
	// stopped holds the ingest failure after which the bridge refuses all
	// work (N7): the drained rows of that batch cannot be sent again with
	// the same seqs, only a restart (new epoch) redelivers them.
	stopped atomic.Pointer[error]
}

// Err returns the failure that stopped the bridge, or nil.
func (b *Bridge) Err() error {
	if e := b.stopped.Load(); e != nil {
		return *e
	}
	return nil
}

func (b *Bridge) stop(err error) error {
	b.stopped.CompareAndSwap(nil, &err)
	return err
}

func (b *Bridge) checkStopped() error {
	if err := b.Err(); err != nil {
		return fmt.Errorf("normalize: bridge stopped after an earlier failure (restart with a new epoch): %w", err)
	}
	return nil
}

// New builds a bridge; Open must be called before any callback.
func New(cfg Config, sink Sink) (*Bridge, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if sink == nil {
		return nil, fmt.Errorf("normalize: nil Sink")
	}
	b := &Bridge{cfg: c, sink: sink, byID: map[int64]*partition{}}
	byLogical := map[int64]*collection{}
	for i, t := range c.Tables {
		if t.PhysicalID <= 0 {
			return nil, fmt.Errorf("normalize: Tables[%d].PhysicalID = %d, must be > 0", i, t.PhysicalID)
		}
		if t.Info == nil {
			return nil, fmt.Errorf("normalize: Tables[%d] (table %d) has no Info", i, t.PhysicalID)
		}
		if _, dup := b.byID[t.PhysicalID]; dup {
			return nil, fmt.Errorf("normalize: Tables[%d]: duplicate physical id %d", i, t.PhysicalID)
		}
		coll := byLogical[t.Info.ID]
		if coll == nil {
			name := t.Collection
			if name == "" {
				name = c.CollectionName(t.Database, t.Info.Name.L)
			}
			coll = &collection{
				name: name, schemaID: t.SchemaID, logicalID: t.Info.ID, info: t.Info, roles: c.Roles[name],
				source:  SourceInfo{KeyspaceID: c.KeyspaceID, Database: t.Database, Table: t.Info.Name.O, LogicalTableID: t.Info.ID},
				pending: map[string]*apiv1.PutCollectionSchemaRequest{},
			}
			for _, other := range b.collections {
				if other.name == name {
					return nil, fmt.Errorf("normalize: tables %d and %d both map to collection %q", other.logicalID, t.Info.ID, name)
				}
			}
			byLogical[t.Info.ID] = coll
			b.collections = append(b.collections, coll)
		}
		p, err := b.newPartition(t.PhysicalID, coll)
		if err != nil {
			return nil, err
		}
		b.byID[t.PhysicalID] = p
		b.parts = append(b.parts, p)
		coll.partitions = append(coll.partitions, p)
	}
	sort.Slice(b.parts, func(i, j int) bool { return b.parts[i].name < b.parts[j].name })
	sort.Slice(b.collections, func(i, j int) bool { return b.collections[i].name < b.collections[j].name })
	for _, coll := range b.collections {
		sort.Slice(coll.partitions, func(i, j int) bool { return coll.partitions[i].name < coll.partitions[j].name })
	}
	return b, nil
}

// newPartition builds the state of one table path of coll.
func (b *Bridge) newPartition(id int64, coll *collection) (*partition, error) {
	pname := PartitionName(b.cfg.KeyspaceID, id)
	w, err := reorder.NewWaiter[Mutation](reorder.Config{
		Partition: pname, MaxUnsealedRows: b.cfg.MaxUnsealedRows, MaxUnsealedBytes: b.cfg.MaxUnsealedBytes,
		Memory: b.cfg.Spill.Memory, Disk: b.cfg.Spill.Disk, Hint: b.cfg.Spill.Hint,
	}, b.cfg.Timer, b.cfg.BackpressureWindow, b.bufferOptions()...)
	if err != nil {
		return nil, err
	}
	return &partition{tableID: id, name: pname, coll: coll, buf: w}, nil
}

// PartitionNames returns the configured source partitions, sorted.
func (b *Bridge) PartitionNames() []string {
	out := make([]string, len(b.parts))
	for i, p := range b.parts {
		out[i] = p.name
	}
	return out
}

// Resume returns the resume point computed by Open.
func (b *Bridge) Resume() Resume {
	b.ctl.Lock()
	defer b.ctl.Unlock()
	return b.resume
}

func (b *Bridge) tableInfoFor(coll *collection) *minicdc.TableInfo {
	return coll.info
}

// Open reads the emulator's stored state, fixes this run's epoch (N4, N5),
// and creates the collections that have no lineage yet (N30).
func (b *Bridge) Open(ctx context.Context) (Resume, error) {
	b.ctl.Lock()
	defer b.ctl.Unlock()
	if b.opened {
		return b.resume, fmt.Errorf("normalize: Open called twice")
	}
	res, err := ResumePoint(ctx, b.sink, b.PartitionNames(), b.cfg.StartTs)
	if err != nil {
		return Resume{}, err
	}
	list, err := b.sink.ListCollections(ctx, &apiv1.ListCollectionsRequest{})
	if err != nil {
		return Resume{}, fmt.Errorf("normalize: listing collections: %w", err)
	}
	status := map[string]*apiv1.CollectionStatus{}
	for _, st := range list.GetCollections() {
		if st.GetState() == apiv1.CollectionState_COLLECTION_STATE_DROPPED {
			continue
		}
		status[st.GetDefinition().GetName()] = st
	}
	for _, p := range b.parts {
		p.seq = seqCounter{epoch: res.Epoch, next: 1}
		if st, ok := res.Stored[p.name]; ok {
			p.stateInSink = true
			p.advanced = st.GetResolvedTs()
			p.skip = st.GetResolvedTs()
		}
	}
	for _, coll := range b.collections {
		s, err := buildShape(b.tableInfoFor(coll), coll.roles)
		if err != nil {
			return Resume{}, err
		}
		want := buildDefinition(coll.name, s, coll.source, coll.partitionNames(nil), !b.cfg.DisableMetadataAux)
		if st, ok := status[coll.name]; ok {
			mapped := map[string]bool{}
			for _, pn := range st.GetDefinition().GetSourcePartitions() {
				mapped[pn] = true
			}
			for _, p := range coll.partitions {
				if !mapped[p.name] {
					return Resume{}, fmt.Errorf("normalize: collection %q exists but does not map partition %s (mapped: %v)",
						coll.name, p.name, st.GetDefinition().GetSourcePartitions())
				}
			}
			coll.active = true
			coll.def = st.GetDefinition()
			coll.version = st.GetLineage().GetSchemaVersion()
			coll.token = st.GetLineage().GetSchemaGenerationToken()
			coll.lastDDL = st.GetLineage().GetLastDdlCommitTs()
			if st.GetLineage().GetLastUpdatePolicy() != apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_INITIAL_CREATION {
				// A schema change at T is sent only after every row at or
				// below T of the collection's partitions was acknowledged
				// (N26): T is acknowledged progress even when the process
				// stopped before storing it. Skip those rows and store T
				// with the new epoch below (N20, N5), instead of re-sending
				// them against the post-DDL definition. (A bootstrap
				// request, INITIAL_CREATION, flushed nothing.)
				for _, p := range coll.partitions {
					if p.stateInSink && p.advanced < coll.lastDDL {
						p.advanced, p.skip = coll.lastDDL, coll.lastDDL
					}
				}
			}
			continue
		}
		req := &apiv1.PutCollectionSchemaRequest{
			Meta: &apiv1.RequestMeta{
				IdempotencyKey: fmt.Sprintf("init/%s/%d", coll.name, b.cfg.StartTs),
				ClientId:       b.cfg.ClientID,
				ClientKind:     apiv1.ClientKind_CLIENT_KIND_TIDB_DDL_ADAPTER,
			},
			Scope:         &apiv1.SchemaScope{Collection: coll.name, DdlCommitTs: b.cfg.StartTs},
			SchemaVersion: 1,
			Fence: &apiv1.SchemaFence{
				ExpectedPrevSchemaVersion: 0, SchemaGenerationToken: apiv1.InitialGenerationToken, EnforceMonotonicApply: true,
			},
			Definition:   want,
			UpdatePolicy: apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_INITIAL_CREATION,
		}
		resp, err := b.sink.PutCollectionSchema(ctx, req)
		if err != nil {
			return Resume{}, fmt.Errorf("normalize: creating collection %q: %w", coll.name, err)
		}
		coll.applyLineage(req, resp)
		for _, p := range coll.partitions {
			p.stateInSink = false
		}
	}
	// Persist the new epoch at once (N5).
	for _, p := range b.parts {
		if !p.stateInSink || p.advanced == 0 {
			continue
		}
		if _, err := b.sink.AdvancePartition(ctx, &apiv1.PartitionProgress{
			SourcePartition: p.name, SourceEpoch: res.Epoch, ResolvedTs: p.advanced,
		}); err != nil {
			return Resume{}, fmt.Errorf("normalize: persisting epoch %d for %s: %w", res.Epoch, p.name, err)
		}
	}
	b.resume = res
	b.opened = true
	b.ready.Store(true)
	return res, nil
}

func (c *collection) partitionNames(except map[string]bool) []string {
	var out []string
	for _, p := range c.partitions {
		if !p.retired && !except[p.name] {
			out = append(out, p.name)
		}
	}
	return out
}

func (c *collection) applyLineage(req *apiv1.PutCollectionSchemaRequest, resp *apiv1.PutCollectionSchemaResponse) {
	c.active = true
	c.def = req.GetDefinition()
	c.version = resp.GetLineage().GetSchemaVersion()
	if c.version == 0 {
		c.version = req.GetSchemaVersion()
	}
	c.token = resp.GetLineage().GetSchemaGenerationToken()
	c.lastDDL = req.GetScope().GetDdlCommitTs()
}

// overflowError turns the reorder buffer's terminal error into the bridge's
// (N13), matching both ErrReorderOverflow sentinels.
func overflowError(err error) error {
	var oe *reorder.OverflowError
	if errors.As(err, &oe) {
		return &OverflowError{Err: oe}
	}
	return err
}

// OverflowError is the bridge's terminal reorder overflow (N13).
type OverflowError struct {
	Err *reorder.OverflowError
}

func (e *OverflowError) Error() string { return "normalize: " + e.Err.Error() }

// Unwrap exposes the reorder error and the sentinels.
func (e *OverflowError) Unwrap() []error {
	return append([]error{e.Err, ErrReorderOverflow}, runtimeOverflowSentinels...)
}

// runtimeOverflowSentinels are the runtime's sentinels the overflow error
// must also match (M14); set in callback.go.
var runtimeOverflowSentinels []error

// ingestDrained sequences and ingests the rows drained into p.drained
// (N6, N21). Caller holds b.ctl.
func (b *Bridge) ingestDrained(ctx context.Context, p *partition) error {
	defer func() {
		clear(p.drained) // release slab memory
		p.drained = p.drained[:0]
		if cap(p.drained) > 4*b.cfg.MaxBatchRows {
			p.drained = nil // a backlog's drain: do not keep its array
		}
	}()
	if len(p.drained) == 0 {
		return nil
	}
	coll := p.coll
	if !coll.active || p.retired {
		return fmt.Errorf("normalize: %s: %d sealed rows (first commit_ts=%d) for collection %q that is dropped or no longer maps the partition",
			p.name, len(p.drained), p.drained[0].CommitTs, coll.name)
	}
	items := p.drained
	p.cuts = cutPoints(len(items), b.cfg.MaxBatchRows, b.cfg.MaxBatchBytes,
		func(i int) int64 { return items[i].Value.wireSize() }, func(int) string { return coll.token }, p.cuts)
	bb := &batchBuilder{partition: p.name, collection: coll.name, token: coll.token, seq: &p.seq, alloc: &p.alloc}
	if len(p.cuts) == 1 {
		return b.ingestBatch(ctx, p, bb.build(items))
	}
	return b.ingestPipelined(ctx, p, bb, items, p.cuts)
}

// ingestPipelined builds the batches of a drained run on a helper
// goroutine, at most two ahead, while the caller ingests them strictly in
// seq order, each after the previous one was acknowledged (N21, N22):
// building batch i+1 overlaps the emulator's commit of batch i. On the
// first failure the builder stops and the bridge is stopped (N7). The
// builder owns p.seq, p.alloc and items until it has exited, which this
// function waits for before returning.
func (b *Bridge) ingestPipelined(ctx context.Context, p *partition, bb *batchBuilder, items []reorder.Item[Mutation], cuts []int) error {
	ready := make(chan *apiv1.MutationBatch, 1)
	quit := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		defer close(ready)
		start := 0
		defer func() {
			for i := start; i < len(items); i++ {
				items[i].Value.release() // not built: recycle the slab memory
			}
		}()
		for _, end := range cuts {
			batch := bb.build(items[start:end])
			start = end
			select {
			case ready <- batch:
			case <-quit:
				return
			}
		}
	}()
	var err error
	for batch := range ready {
		if err = b.ingestBatch(ctx, p, batch); err != nil {
			break
		}
	}
	close(quit)
	<-exited
	return err
}

// ingestBatch sends one batch and checks its acknowledgement; a failure
// stops the bridge (N7).
func (b *Bridge) ingestBatch(ctx context.Context, p *partition, batch *apiv1.MutationBatch) error {
	resp, err := b.sink.Ingest(ctx, batch)
	if err != nil {
		return b.stop(fmt.Errorf("normalize: ingest %s epoch %d seq %d..%d: %w", p.name, batch.GetSourceEpoch(),
			batch.GetFirstSeq(), batch.GetFirstSeq()+uint64(len(batch.GetMutations()))-1, err))
	}
	last := batch.GetFirstSeq() + uint64(len(batch.GetMutations())) - 1
	if resp.GetLastSeq() != last {
		return b.stop(fmt.Errorf("normalize: ingest %s: emulator acknowledged last seq %d, sent %d..%d (outcome %s)",
			p.name, resp.GetLastSeq(), batch.GetFirstSeq(), last, resp.GetOutcome()))
	}
	p.stateInSink = true
	p.ingested += uint64(len(batch.GetMutations()))
	return nil
}

// PartitionStats is a snapshot of one partition's bridge state.
type PartitionStats struct {
	Partition  string
	Collection string
	Epoch      uint64
	// NextSeq is the seq the next emitted mutation gets.
	NextSeq uint64
	// ResolvedTs is the progress last stored with the emulator.
	ResolvedTs uint64
	// UnsealedRows and UnsealedBytes are what the reorder buffer holds
	// against its bounds; SealedRows are sealed but not yet drained.
	UnsealedRows  int
	UnsealedBytes int64
	SealedRows    int
	// RowsIn counts buffered row mutations, Ingested acknowledged ones,
	// both since Open.
	RowsIn   uint64
	Ingested uint64
	// HeldBytes are charged to the memory quota (RS1); SpilledRows are on
	// disk, not yet drained; SpilledBytes and SpillFiles are the runs not
	// yet removed (RS4).
	HeldBytes    int64
	SpilledRows  int
	SpilledBytes int64
	SpillFiles   int
	// SpillRuns counts the runs written since Open.
	SpillRuns uint64
}

// Stats returns a snapshot per partition, sorted by partition name.
func (b *Bridge) Stats() []PartitionStats {
	b.ctl.Lock()
	defer b.ctl.Unlock()
	out := make([]PartitionStats, 0, len(b.parts))
	for _, p := range b.parts {
		st := PartitionStats{Partition: p.name, Collection: p.coll.name, Epoch: p.seq.epoch, NextSeq: p.seq.next,
			ResolvedTs: p.advanced, RowsIn: p.rows.Load(), Ingested: p.ingested}
		_ = p.buf.Do(func(buf *reorder.Buffer[Mutation]) error {
			st.UnsealedRows, st.UnsealedBytes = buf.Unsealed()
			st.SealedRows = buf.Sealed()
			st.HeldBytes = buf.Held()
			sp := buf.Spilled()
			st.SpilledRows, st.SpilledBytes, st.SpillFiles, st.SpillRuns = sp.Rows, sp.Bytes, sp.Files, sp.Runs
			return nil
		})
		out = append(out, st)
	}
	return out
}

// advance stores the partition's progress when it grew (N22, N23).
func (b *Bridge) advance(ctx context.Context, p *partition, ts uint64) error {
	if p.retired || !p.coll.active || ts <= p.advanced {
		return nil
	}
	if _, err := b.sink.AdvancePartition(ctx, &apiv1.PartitionProgress{
		SourcePartition: p.name, SourceEpoch: p.seq.epoch, ResolvedTs: ts,
	}); err != nil {
		return fmt.Errorf("normalize: advance %s to %d: %w", p.name, ts, err)
	}
	p.advanced = ts
	p.stateInSink = true
	return nil
}

// CheckpointRegressionError is N23's fatal regression.
type CheckpointRegressionError struct {
	Partition string
	Old, New  uint64
}

func (e *CheckpointRegressionError) Error() string {
	return fmt.Sprintf("normalize: checkpoint for %s regressed: old=%d new=%d", e.Partition, e.Old, e.New)
}

// Checkpoint is the checkpoint path (N22): per partition, ascending by
// name, seal at its resolved ts, ingest, then advance progress.
func (b *Bridge) Checkpoint(ctx context.Context, tableResolved map[int64]uint64) error {
	b.ctl.Lock()
	defer b.ctl.Unlock()
	if !b.opened {
		return fmt.Errorf("normalize: checkpoint before Open")
	}
	if err := b.checkStopped(); err != nil {
		return err
	}
	if b.tableSet != nil {
		// Every DDL of the change's FinishedTs group was delivered (the
		// runtime emits a group before its next checkpoint, M32): the
		// adapter must restart now (N35).
		return b.tableSet
	}
	for id := range tableResolved {
		if _, ok := b.byID[id]; !ok {
			return fmt.Errorf("normalize: checkpoint names table %d, which is not configured", id)
		}
	}
	for _, p := range b.parts {
		ts, ok := tableResolved[p.tableID]
		if !ok {
			continue
		}
		if ts < p.lastCP {
			return &CheckpointRegressionError{Partition: p.name, Old: p.lastCP, New: ts}
		}
		p.lastCP = ts
		if err := b.drainAndIngest(ctx, p, ts, false); err != nil {
			return err
		}
		if err := b.advance(ctx, p, ts); err != nil {
			return err
		}
	}
	return nil
}

// DDL is the DDL path (N25-N29).
func (b *Bridge) DDL(ctx context.Context, ddl minicdc.DDL) error {
	ev := &ddl
	b.ctl.Lock()
	defer b.ctl.Unlock()
	if !b.opened {
		return fmt.Errorf("normalize: DDL before Open")
	}
	if err := b.checkStopped(); err != nil {
		return err
	}
	T := ev.FinishedTs
	if b.tableSet != nil && T > b.tableSet.FinishedTs {
		// A later DDL: the change's group is complete (N35). This DDL is
		// redelivered after the restart (its FinishedTs is above the
		// resume point).
		return b.tableSet
	}
	tableSet := b.changesTableSet(ev)
	if tableSet {
		// The restart resumes every partition from T (N34): flush all of
		// them now (and advance them once the schema requests were
		// acknowledged, below). Every row at or below T of every path was
		// delivered (the DDL fence is the min over all tables, M29).
		for _, p := range b.parts {
			if err := b.drainAndIngest(ctx, p, T, true); err != nil {
				return err
			}
		}
	}
	for _, coll := range b.collections {
		if !affects(ev, coll) {
			continue
		}
		if coll.appliedBefore(T, ev.JobID) {
			continue // already applied (N28)
		}
		// Flush every row at or below T (N26). Progress at T is stored
		// only after the schema change at T was acknowledged: a resume
		// at T would not redeliver the DDL (the start ts is exclusive).
		for _, p := range coll.partitions {
			if err := b.drainAndIngest(ctx, p, T, true); err != nil {
				return err
			}
		}
		wasActive := coll.active
		key := fmt.Sprintf("ddl/%d/%d/%s", ev.JobID, T, coll.name)
		req := coll.pending[key]
		var dropped map[string]bool
		if req == nil {
			var skip bool
			var err error
			req, dropped, skip, err = b.schemaRequest(ev, coll, key)
			if err != nil {
				return err
			}
			if skip {
				continue
			}
			coll.pending[key] = req
		} else {
			dropped = droppedPartitions(ev, coll)
		}
		resp, err := b.sink.PutCollectionSchema(ctx, req)
		if err != nil {
			return fmt.Errorf("normalize: DDL job %d (%s) at %d for collection %q: %w",
				ev.JobID, ev.Action, T, coll.name, err)
		}
		delete(coll.pending, key)
		sameTs := coll.lastJobs != nil && coll.lastDDL == T
		added, removed, err := b.applyDDL(coll, req, resp, dropped, postInfo(ev, coll))
		if err != nil {
			return err
		}
		if !sameTs {
			coll.lastJobs = map[int64]bool{}
		}
		coll.lastJobs[ev.JobID] = true
		if len(added) > 0 || len(removed) > 0 {
			b.noteTableSetChange(ev, coll, added, removed)
		}
		if wasActive {
			// Every row at or below T was acknowledged and so is the
			// schema change at T: record the progress (N26).
			for _, p := range coll.partitions {
				if err := b.advance(ctx, p, T); err != nil {
					return err
				}
			}
		}
	}
	if tableSet {
		for _, p := range b.parts {
			if err := b.advance(ctx, p, T); err != nil {
				return err
			}
		}
	}
	return nil
}

// TableSetChangedError reports that DDLs changed the physical tables of
// the mirrored logical tables (N34): a truncated table or partition got a
// new id, partitions were added or dropped. The bridge already sent the
// schema requests that map the new partitions (from FinishedTs on, E29)
// and advanced every partition to FinishedTs; the Mini-CDC runtime, whose
// table set is fixed (M6), must be restarted with Tables (resume point:
// ResumePoint over their partitions, which is FinishedTs; next epoch).
// The bridge returns it from a callback, so the runtime stops with it
// wrapped in a *minicdc.FatalError; find it with errors.As.
type TableSetChangedError struct {
	// JobID, Action and Query name the first DDL of the change; Collection
	// the collection it changed.
	JobID      int64
	Action     string
	Query      string
	Collection string
	// FinishedTs is the DDLs' commit ts; every partition's progress was
	// stored at it.
	FinishedTs uint64
	// Added and Dropped are the physical ids mapped and unmapped by the
	// change (all DDLs of the FinishedTs group), sorted.
	Added, Dropped []int64
	// NewTableIDs are every physical id the restarted runtime must follow
	// (its StartConfig.TableIDs), sorted.
	NewTableIDs []int64
	// Tables is the bridge configuration of the restart: one entry per
	// physical id, with the post-DDL schema and the collection binding.
	Tables []Table
}

func (e *TableSetChangedError) Error() string {
	return fmt.Sprintf("normalize: table set changed by DDL job %d (%s) at %d on collection %q: added %v, dropped %v; restart the adapter with tables %v",
		e.JobID, e.Action, e.FinishedTs, e.Collection, e.Added, e.Dropped, e.NewTableIDs)
}

// changesTableSet reports whether ev maps or unmaps physical tables of a
// collection it affects that stays active (N34).
func (b *Bridge) changesTableSet(ev *minicdc.DDL) bool {
	for _, coll := range b.collections {
		if !affects(ev, coll) || coll.appliedBefore(ev.FinishedTs, ev.JobID) || isDropAction(ev.Action) {
			continue
		}
		if len(droppedPartitions(ev, coll)) > 0 || len(addedPartitions(ev, coll)) > 0 {
			return true
		}
	}
	return false
}

// noteTableSetChange records (or extends, for another DDL of the same
// FinishedTs group) the pending TableSetChangedError. Caller holds ctl.
func (b *Bridge) noteTableSetChange(ev *minicdc.DDL, coll *collection, added, removed []int64) {
	e := b.tableSet
	if e == nil {
		e = &TableSetChangedError{JobID: ev.JobID, Action: ev.Action.String(), Query: ev.Query,
			Collection: coll.name, FinishedTs: ev.FinishedTs}
		b.tableSet = e
	}
	e.Added = sortedIDs(append(e.Added, added...))
	e.Dropped = sortedIDs(append(e.Dropped, removed...))
	e.NewTableIDs, e.Tables = e.NewTableIDs[:0], e.Tables[:0]
	for _, c := range b.collections {
		if !c.active {
			continue // dropped: nothing left to follow
		}
		for _, p := range c.partitions {
			if p.retired {
				continue
			}
			e.NewTableIDs = append(e.NewTableIDs, p.tableID)
			e.Tables = append(e.Tables, Table{PhysicalID: p.tableID, SchemaID: c.schemaID, Database: c.source.Database,
				Info: c.info, Collection: c.name})
		}
	}
	sort.Slice(e.Tables, func(i, j int) bool { return e.Tables[i].PhysicalID < e.Tables[j].PhysicalID })
	e.NewTableIDs = sortedIDs(e.NewTableIDs)
}

func sortedIDs(ids []int64) []int64 {
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// PendingTableSetChange returns the table-set change found by a DDL and
// not yet reported, or nil.
func (b *Bridge) PendingTableSetChange() *TableSetChangedError {
	b.ctl.Lock()
	defer b.ctl.Unlock()
	return b.tableSet
}

// appliedBefore reports a DDL event the collection's lineage already
// covers (N28): an older FinishedTs, or the same FinishedTs and either the
// same job applied by this run or a lineage learned from the emulator (a
// group of events sharing one FinishedTs is delivered together, M32).
func (c *collection) appliedBefore(ts uint64, jobID int64) bool {
	if !c.active && c.lastDDL == 0 {
		return false
	}
	if ts < c.lastDDL {
		return true
	}
	if ts == c.lastDDL {
		return c.lastJobs == nil || c.lastJobs[jobID]
	}
	return false
}

// applyDDL updates the bridge's lineage after an acknowledged request and
// returns the physical ids the request mapped and unmapped (N34).
func (b *Bridge) applyDDL(coll *collection, req *apiv1.PutCollectionSchemaRequest, resp *apiv1.PutCollectionSchemaResponse,
	dropped map[string]bool, post *minicdc.TableInfo) (added, removed []int64, err error) {
	switch req.GetUpdatePolicy() {
	case apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_DROP:
		coll.active = false
		coll.def = nil
		coll.token = ""
		coll.version = 0
		coll.lastDDL = req.GetScope().GetDdlCommitTs()
		for _, p := range coll.partitions {
			// The emulator removed the partition's state (E30).
			p.seq.next, p.advanced, p.stateInSink = 1, 0, false
		}
		return nil, nil, nil
	case apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_INITIAL_CREATION:
		for _, p := range coll.partitions {
			p.retired = false
			p.seq.next, p.advanced, p.stateInSink = 1, 0, false
		}
	}
	for _, p := range coll.partitions {
		if dropped[p.name] && !p.retired {
			p.retired = true
			removed = append(removed, p.tableID)
		}
	}
	// Partitions the definition maps that the collection did not have
	// (N34): the emulator starts them at ddl_commit_ts (E29).
	have := map[string]bool{}
	for _, p := range coll.partitions {
		if !p.retired {
			have[p.name] = true
		}
	}
	T := req.GetScope().GetDdlCommitTs()
	for _, name := range req.GetDefinition().GetSourcePartitions() {
		if have[name] {
			continue
		}
		id, ok := partitionID(name)
		if !ok {
			return nil, nil, fmt.Errorf("normalize: collection %q: cannot parse source partition %q", coll.name, name)
		}
		np, err := b.newPartition(id, coll)
		if err != nil {
			return nil, nil, err
		}
		np.added, np.advanced, np.stateInSink, np.lastCP = true, T, true, T
		np.seq = seqCounter{epoch: b.resume.Epoch, next: 1}
		coll.partitions = append(coll.partitions, np)
		added = append(added, id)
	}
	sort.Slice(coll.partitions, func(i, j int) bool { return coll.partitions[i].name < coll.partitions[j].name })
	if src := req.GetDefinition().GetSource(); src != nil {
		coll.source.Database, coll.source.Table = src.GetDatabase(), src.GetTable()
		if id := src.GetLogicalTableId(); id != 0 {
			coll.logicalID, coll.source.LogicalTableID = id, id
		}
	}
	if post != nil {
		coll.info = post
	}
	coll.applyLineage(req, resp)
	return added, removed, nil
}

// partitionID parses the physical id out of a source partition name (N1).
func partitionID(name string) (int64, bool) {
	i := strings.LastIndex(name, "table:")
	if i < 0 {
		return 0, false
	}
	id, err := strconv.ParseInt(name[i+len("table:"):], 10, 64)
	return id, err == nil && id > 0
}

// affects is N25.
func affects(ev *minicdc.DDL, coll *collection) bool {
	ids := map[int64]bool{coll.logicalID: true}
	for _, p := range coll.partitions {
		ids[p.tableID] = true
	}
	if ids[ev.TableID] {
		return true
	}
	if ev.Table != nil && ids[ev.Table.ID] {
		return true
	}
	for _, ti := range ev.MultipleTables {
		if ti != nil && ids[ti.ID] {
			return true
		}
	}
	for _, id := range ev.DroppedTableIDs {
		if ids[id] {
			return true
		}
	}
	return ev.Action == minicdc.ActionDropSchema && ev.SchemaID == coll.schemaID
}

// postInfo finds the post-DDL schema of coll in ev.
func postInfo(ev *minicdc.DDL, coll *collection) *minicdc.TableInfo {
	for _, ti := range ev.MultipleTables {
		if ti != nil && ti.ID == coll.logicalID {
			return ti
		}
	}
	if ev.Table != nil {
		if ev.Table.ID == coll.logicalID || ev.TableID == coll.logicalID {
			return ev.Table
		}
		if ev.Action == minicdc.ActionTruncateTable {
			return ev.Table // same columns under a new id
		}
	}
	return nil
}

// droppedPartitions lists the collection's partitions the DDL removes
// (N34): the ids it drops and, when it carries the post-DDL table, every
// partition that table no longer has (a truncated table or partition
// lives on under a new id).
func droppedPartitions(ev *minicdc.DDL, coll *collection) map[string]bool {
	out := map[string]bool{}
	drop := map[int64]bool{}
	for _, id := range ev.DroppedTableIDs {
		drop[id] = true
	}
	var live map[int64]bool
	if ti := postInfo(ev, coll); ti != nil && !isDropAction(ev.Action) {
		live = map[int64]bool{}
		for _, id := range ti.PhysicalIDs() {
			live[id] = true
		}
	}
	for _, p := range coll.partitions {
		if p.retired {
			continue
		}
		if drop[p.tableID] || (live != nil && !live[p.tableID]) {
			out[p.name] = true
		}
	}
	return out
}

// addedPartitions lists the physical tables the DDL creates for the
// collection's logical table (N34): its NeedAddedTables that the post-DDL
// table has and the collection does not map yet.
func addedPartitions(ev *minicdc.DDL, coll *collection) []int64 {
	ti := postInfo(ev, coll)
	if ti == nil || isDropAction(ev.Action) {
		return nil
	}
	ids := make([]int64, 0, len(ev.AddedTables))
	for _, a := range ev.AddedTables {
		ids = append(ids, a.TableID)
	}
	if ev.Action == minicdc.ActionExchangeTablePartition && ti.ID == coll.logicalID {
		// The exchanged-in table's id becomes a partition; the store
		// lists no added table (no new subscription in TiCDC's view).
		ids = ti.PhysicalIDs()
	}
	if len(ids) == 0 {
		return nil
	}
	phys := map[int64]bool{}
	for _, id := range ti.PhysicalIDs() {
		phys[id] = true
	}
	have := map[int64]bool{}
	for _, p := range coll.partitions {
		if !p.retired {
			have[p.tableID] = true
		}
	}
	var out []int64
	for _, id := range ids {
		if phys[id] && !have[id] {
			out = append(out, id)
			have[id] = true
		}
	}
	return out
}

// schemaRequest builds the complete request for one DDL and collection
// (N26, N27). skip reports a DDL that needs no request (a drop of a
// collection that has no lineage).
func (b *Bridge) schemaRequest(ev *minicdc.DDL, coll *collection, key string) (req *apiv1.PutCollectionSchemaRequest, dropped map[string]bool, skip bool, err error) {
	T := ev.FinishedTs
	dropped = droppedPartitions(ev, coll)
	live := coll.partitionNames(dropped)
	for _, id := range addedPartitions(ev, coll) {
		live = append(live, PartitionName(b.cfg.KeyspaceID, id))
	}
	dropAll := isDropAction(ev.Action) || len(live) == 0
	meta := &apiv1.RequestMeta{IdempotencyKey: key, ClientId: b.cfg.ClientID, ClientKind: apiv1.ClientKind_CLIENT_KIND_TIDB_DDL_ADAPTER}
	scope := &apiv1.SchemaScope{Collection: coll.name, DdlCommitTs: T}
	if dropAll {
		if !coll.active {
			return nil, nil, true, nil
		}
		return &apiv1.PutCollectionSchemaRequest{
			Meta: meta, Scope: scope, SchemaVersion: uint64(ev.SchemaVersion),
			Fence:        &apiv1.SchemaFence{ExpectedPrevSchemaVersion: coll.version, SchemaGenerationToken: coll.token, EnforceMonotonicApply: true},
			Definition:   coll.def,
			UpdatePolicy: apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_DROP,
		}, dropped, false, nil
	}
	ti := postInfo(ev, coll)
	if ti == nil {
		return nil, nil, false, fmt.Errorf("normalize: DDL job %d (%s) at %d affects collection %q but carries no schema for table %d",
			ev.JobID, ev.Action, T, coll.name, coll.logicalID)
	}
	s, err := buildShape(ti, coll.roles)
	if err != nil {
		return nil, nil, false, fmt.Errorf("normalize: DDL job %d at %d: %w", ev.JobID, T, err)
	}
	src := coll.source
	if ev.SchemaName != "" {
		src.Database = ev.SchemaName
	}
	src.Table = ti.Name.O
	src.LogicalTableID = ti.ID // a truncated table has a new id (N34)
	def := buildDefinition(coll.name, s, src, live, !b.cfg.DisableMetadataAux)
	var old *apiv1.CollectionDefinition
	if coll.active {
		old = coll.def
	}
	policy := Classify(ev.Action, false, old, def)
	req = &apiv1.PutCollectionSchemaRequest{Meta: meta, Scope: scope, Definition: def, UpdatePolicy: policy}
	if policy == apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_INITIAL_CREATION {
		req.SchemaVersion = 1 // the zero-state tuple (E23, N27)
		req.Fence = &apiv1.SchemaFence{ExpectedPrevSchemaVersion: 0, SchemaGenerationToken: apiv1.InitialGenerationToken, EnforceMonotonicApply: true}
		return req, dropped, false, nil
	}
	if ev.SchemaVersion <= 0 {
		return nil, nil, false, fmt.Errorf("normalize: DDL job %d at %d has schema version %d, want > 0", ev.JobID, T, ev.SchemaVersion)
	}
	req.SchemaVersion = uint64(ev.SchemaVersion)
	req.Fence = &apiv1.SchemaFence{ExpectedPrevSchemaVersion: coll.version, SchemaGenerationToken: coll.token, EnforceMonotonicApply: true}
	return req, dropped, false, nil
}
