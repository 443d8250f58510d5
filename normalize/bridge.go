package normalize

import (
	"fmt"
	"sort"
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
	seqRun   seqRun // the seq-contiguity invariant (-tags invariants)
	advanced uint64 // last resolved ts stored for the partition
	lastCP   uint64 // last checkpoint value seen
	retired  bool   // removed from its collection by a DDL
	// added marks a partition a DDL of this run mapped (add partition,
	// the new id of a truncated table or partition): this run's runtime
	// does not subscribe it, so it gets no rows and reports nothing until
	// the adapter restarts with the new table set (N34).
	added bool
	// held: a snapshot is being ingested into it (LT6); checkpoints
	// only record lastCP until ReleasePartitions.
	held        bool
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

	active bool
	// detached: the table left the mirrored set (renamed out of the
	// filter, removed through /admin/tables) and the collection is kept
	// as it was; no DDL or row reaches it any more (LT3).
	detached bool
	def      *apiv1.CollectionDefinition
	version  uint64
	token    string
	lastDDL  uint64
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

	// byID is replaced, never changed, once the bridge is built: the row
	// path reads it without a lock while AddTables publishes a new one
	// (specs/tableset.md LT1).
	byID        atomic.Pointer[map[int64]*partition]
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
	b := &Bridge{cfg: c, sink: sink}
	byID := map[int64]*partition{}
	b.byID.Store(&byID)
	byLogical := map[int64]*collection{}
	for i, t := range c.Tables {
		if t.PhysicalID <= 0 {
			return nil, fmt.Errorf("normalize: Tables[%d].PhysicalID = %d, must be > 0", i, t.PhysicalID)
		}
		if t.Info == nil {
			return nil, fmt.Errorf("normalize: Tables[%d] (table %d) has no Info", i, t.PhysicalID)
		}
		if _, dup := byID[t.PhysicalID]; dup {
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
		byID[t.PhysicalID] = p
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

// PartitionNames returns the source partitions the bridge follows, sorted.
// The live table set changes them under ctl (publish), so it reads there.
func (b *Bridge) PartitionNames() []string {
	b.ctl.Lock()
	defer b.ctl.Unlock()
	return b.partitionNamesLocked()
}

// partitionNamesLocked is PartitionNames for a caller holding ctl.
func (b *Bridge) partitionNamesLocked() []string {
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
