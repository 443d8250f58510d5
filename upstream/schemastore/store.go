package schemastore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
)

// Config configures a Store. See specs/schemastore.md.
type Config struct {
	// Dir holds one bbolt file per keyspace. Required.
	Dir string
	// Snapshot reads the meta keys for the initial snapshot of a fresh
	// store and the cluster's GC safe point. Required unless the store
	// file already exists.
	Snapshot kvevent.SnapshotReader
	// Source, when set, is where RegisterKeyspace subscribes the DDL job
	// span (the runtime drives Source.Run). When nil, the caller feeds the
	// store: DDLSubscriptions tells it what to subscribe (rule SS3).
	Source kvevent.Source
	// SubscriptionID is the subID used with Source (the history span, when
	// enabled, uses SubscriptionID+1). Default DefaultSubscriptionID.
	SubscriptionID uint64
	// NextGen selects keyspace-prefixed keys (API v2).
	NextGen bool
	// InitialTs is the snapshot ts of a fresh store; 0 means the cluster's
	// GC safe point (TiCDC's choice: the widest history available).
	InitialTs uint64
	// FollowHistory also follows mysql.tidb_ddl_history, for TiDB 7.6-8.2
	// with fast create table (only CreateTable/CreateTables jobs in state
	// Synced are taken from it; duplicates are dropped).
	FollowHistory bool
	// MetaScanPage is the page size of meta scans. Default 1024.
	MetaScanPage int
	// Logger receives skip notices. Default: discard.
	Logger *slog.Logger
}

// DefaultSubscriptionID is the subID the store uses with Config.Source.
const DefaultSubscriptionID uint64 = 1<<62 + 6

// Subscription is one DDL span the caller must feed when Config.Source is
// nil: changes of Span with commit_ts > StartTs go to Consumer.
type Subscription struct {
	Name     string
	Span     kvevent.Span
	StartTs  uint64
	Consumer kvevent.Consumer
}

// Store is the durable multi-version schema store of one keyspace.
//
// Concurrency: lookups (GetTableInfo, GetTableDDLEventState,
// FetchTableTriggerDDLEvents) run concurrently with DDL ingestion; ingestion
// and GC are serialized.
//
// Read-only values (rule SS40): TableInfo pointers returned by GetTableInfo
// are shared between callers and must not be modified; the store never
// reads them back: later DDLs are derived from private copies and
// persistence writes private bytes, so a caller that mutates a returned
// value cannot change the store's history, its events or its files. DDL
// events are returned as deep copies.
type Store struct {
	cfg Config
	log *slog.Logger

	// writeMu serializes ingestion, applying, persistence and GC.
	writeMu   sync.Mutex
	pending   map[pendingKey]*model.Job
	consumers []*ddlConsumer

	// mu guards h (lookups take the read lock).
	mu sync.RWMutex
	h  *history

	p          *persister
	registered atomic.Bool
	keyspace   uint32
	subs       []Subscription
	tables     map[int64]uint64 // RegisterTable: table -> start ts (under mu)

	failure atomic.Pointer[error]
	closed  atomic.Bool
	done    chan struct{} // closed by Close; ends the context watcher
	// advanced is closed, and replaced, each time a new resolved ts is
	// published (under mu): readers waiting for the store to reach a ts
	// (minicdc M22, M34a) wake at once instead of polling on a timer.
	advanced chan struct{}
}

// ResolvedAdvanced returns a channel closed the next time the store
// publishes a larger resolved ts (minicdc.StoreNotifier).
func (s *Store) ResolvedAdvanced() <-chan struct{} {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.advanced
}

// New validates cfg and returns a store that does nothing until
// RegisterKeyspace.
func New(cfg Config) (*Store, error) {
	if cfg.Dir == "" {
		return nil, fmt.Errorf("%w: Config.Dir is required", ErrBadInput)
	}
	if cfg.SubscriptionID == 0 {
		cfg.SubscriptionID = DefaultSubscriptionID
	}
	if cfg.MetaScanPage <= 0 {
		cfg.MetaScanPage = 1024
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Store{cfg: cfg, log: log, pending: map[pendingKey]*model.Job{}, tables: map[int64]uint64{}, done: make(chan struct{}), advanced: make(chan struct{})}, nil
}

// Path returns the bbolt file of a keyspace.
func (s *Store) Path(keyspaceID uint32) string {
	return filepath.Join(s.cfg.Dir, fmt.Sprintf("schemastore-ks%d.db", keyspaceID))
}

func (s *Store) fail(err error) {
	s.failure.CompareAndSwap(nil, &err)
	s.log.Error("schemastore: stopped by error", "err", err)
}

func (s *Store) failedErr() error {
	if p := s.failure.Load(); p != nil {
		return *p
	}
	return nil
}

// Err returns the error that stopped the store (a failed write, a DDL job
// that contradicts the history, a malformed job row), or nil.
func (s *Store) Err() error { return s.failedErr() }

// check is the gate of every API call (rules SS1, SS2).
func (s *Store) check() error {
	if !s.registered.Load() {
		return ErrNotRegistered
	}
	if err := s.failedErr(); err != nil {
		return err
	}
	if s.closed.Load() {
		return ErrStopped
	}
	return nil
}

// RegisterKeyspace opens (or creates from an initial meta snapshot) the
// keyspace's store and starts following its DDL spans. ctx must live as
// long as the store is used: when it ends, the store stops and every call
// returns ErrStopped (rule SS2). It may be called once.
func (s *Store) RegisterKeyspace(ctx context.Context, keyspaceID uint32) error {
	if s.registered.Load() {
		return fmt.Errorf("%w: RegisterKeyspace called twice", ErrBadInput)
	}
	if s.cfg.NextGen {
		if err := tablecodec.ValidateKeyspaceID(keyspaceID); err != nil {
			return fmt.Errorf("%w: %v", ErrBadInput, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.MkdirAll(s.cfg.Dir, 0o755); err != nil {
		return fmt.Errorf("schemastore: %w", err)
	}
	p, err := openBolt(s.Path(keyspaceID))
	if err != nil {
		return err
	}
	st, err := s.openOrCreate(ctx, p, keyspaceID)
	if err != nil {
		_ = p.db.Close()
		return err
	}
	s.writeMu.Lock()
	s.p = p
	s.keyspace = keyspaceID
	s.consumers, s.subs = nil, nil
	err = s.setupConsumers(st)
	s.writeMu.Unlock()
	// undo detaches the file so deliveries from a subscription made before
	// a later failure are dropped instead of written.
	undo := func() {
		s.writeMu.Lock()
		s.p = nil
		s.writeMu.Unlock()
		_ = p.db.Close()
	}
	if err != nil {
		undo()
		return err
	}
	if s.cfg.Source != nil {
		for i, sub := range s.subs {
			if err := s.cfg.Source.Subscribe(ctx, s.cfg.SubscriptionID+uint64(i), sub.Span, sub.StartTs, sub.Consumer); err != nil {
				undo()
				return fmt.Errorf("schemastore: subscribe %s: %w", sub.Name, err)
			}
		}
	}
	s.registered.Store(true)
	go func() {
		select {
		case <-ctx.Done():
			s.closed.Store(true)
		case <-s.done:
		}
	}()
	return nil
}

// openBolt opens the file, turning bbolt panics on corrupt pages into
// errors. The file is checked first, read and not mapped (SS58): bbolt
// maps past the end of a file cut short, where a read faults (SIGBUS),
// and its tx.Check walks the pages on a goroutine of its own, where a
// panic on a damaged page cannot be recovered; what bbolt itself still
// faults on here (SetPanicOnFault) becomes a recovered panic.
func openBolt(path string) (p *persister, err error) {
	if err := precheckFile(path); err != nil {
		return nil, err
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = &CorruptError{Path: path, Reason: fmt.Sprintf("bbolt: %v", r)}
		}
	}()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, PreLoadFreelist: true})
	if err != nil {
		if errors.Is(err, bolt.ErrInvalid) || errors.Is(err, bolt.ErrChecksum) || errors.Is(err, bolt.ErrVersionMismatch) {
			return nil, &CorruptError{Path: path, Reason: err.Error()}
		}
		return nil, fmt.Errorf("schemastore: open %s: %w", path, err)
	}
	return &persister{db: db, path: path}, nil
}

// checkBolt runs bbolt's own page consistency check. It runs tx.Check
// only on a file precheckFile passed: every page that check visits (the
// tree from the meta page, the freelist page) was read and checked
// before, on this goroutine, so bbolt's checker goroutine meets no page
// it would fault or panic on.
func (p *persister) checkBolt() (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = &CorruptError{Path: p.path, Reason: fmt.Sprintf("bbolt: %v", r)}
		}
	}()
	return p.db.View(func(tx *bolt.Tx) error {
		var first error
		// Drain the channel: the checker goroutine uses tx until it closes it.
		for cerr := range tx.Check() {
			if first == nil {
				first = &CorruptError{Path: p.path, Reason: "bbolt check: " + cerr.Error()}
			}
		}
		return first
	})
}

func (s *Store) openOrCreate(ctx context.Context, p *persister, keyspaceID uint32) (st *storedState, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = &CorruptError{Path: p.path, Reason: fmt.Sprintf("bbolt: %v", r)}
		}
	}()
	if err := p.checkBolt(); err != nil {
		return nil, err
	}
	ok, err := p.isInitialized()
	if err != nil {
		return nil, err
	}
	if ok {
		h, st, err := p.load()
		if err != nil {
			return nil, err
		}
		if st.keyspace != keyspaceID {
			return nil, &CorruptError{Path: p.path, Reason: fmt.Sprintf("store belongs to keyspace %d, not %d", st.keyspace, keyspaceID)}
		}
		// Resuming below the cluster's GC safe point would miss DDL
		// versions the incremental scan can no longer return (rule SS55).
		if s.cfg.Snapshot != nil {
			safe, err := s.cfg.Snapshot.GCSafePoint(ctx)
			if err != nil {
				return nil, fmt.Errorf("schemastore: read GC safe point: %w", err)
			}
			if h.resolvedTs < safe {
				return nil, &GCError{What: "resume DDL subscription", Ts: h.resolvedTs, GCTs: safe, GCWhose: "cluster GC safe point"}
			}
		}
		s.h = h
		return st, nil
	}
	return s.create(ctx, p, keyspaceID)
}

// create takes the initial snapshot and writes a fresh store (rules SS10-SS13).
func (s *Store) create(ctx context.Context, p *persister, keyspaceID uint32) (*storedState, error) {
	r := s.cfg.Snapshot
	if r == nil {
		return nil, fmt.Errorf("%w: Config.Snapshot is required to create the store %s", ErrBadInput, p.path)
	}
	safe, err := r.GCSafePoint(ctx)
	if err != nil {
		return nil, fmt.Errorf("schemastore: read GC safe point: %w", err)
	}
	ts := s.cfg.InitialTs
	if ts == 0 {
		ts = safe
	}
	if ts < safe {
		return nil, &GCError{What: "initial snapshot", Ts: ts, GCTs: safe, GCWhose: "cluster GC safe point"}
	}
	var prefix []byte
	if s.cfg.NextGen {
		prefix = tablecodec.AppendKeyspacePrefix(nil, keyspaceID)
	}
	snap, err := readMetaSnapshot(ctx, r, prefix, ts, s.cfg.MetaScanPage)
	if err != nil {
		return nil, err
	}
	if snap.jobTable == nil {
		return nil, fmt.Errorf("schemastore: meta snapshot at %d has no mysql.%s table: cannot decode DDL jobs", ts, ddlJobTableName)
	}
	if s.cfg.FollowHistory && snap.histTable == nil {
		return nil, fmt.Errorf("schemastore: meta snapshot at %d has no mysql.%s table, but FollowHistory is set", ts, ddlHistoryTableName)
	}
	h := newHistory()
	ch := newChangeSet()
	h.loadSnapshot(snap, ch)
	h.last = jobPos{ts: ts, ver: 1<<63 - 1}
	if err := p.initialize(keyspaceID, ts, snap.jobTable, snap.histTable, ch); err != nil {
		return nil, err
	}
	s.h = h
	return &storedState{keyspace: keyspaceID, snapshotTs: ts, jobTable: snap.jobTable, histTable: snap.histTable}, nil
}

func (s *Store) setupConsumers(st *storedState) error {
	add := func(kind spanKind, ti *model.TableInfo) error {
		dec, err := newJobDecoder(ti)
		if err != nil {
			return err
		}
		c := &ddlConsumer{s: s, kind: kind, dec: dec, resolved: s.h.resolvedTs}
		s.consumers = append(s.consumers, c)
		s.subs = append(s.subs, Subscription{
			Name:     "mysql." + kind.String(),
			Span:     tablecodec.TableRecordSpan(s.keyspace, s.cfg.NextGen, ti.ID),
			StartTs:  s.h.resolvedTs,
			Consumer: c,
		})
		return nil
	}
	if err := add(spanJob, st.jobTable); err != nil {
		return err
	}
	if s.cfg.FollowHistory {
		if st.histTable == nil {
			return fmt.Errorf("schemastore: FollowHistory is set but the store has no mysql.%s layout", ddlHistoryTableName)
		}
		return add(spanHistory, st.histTable)
	}
	return nil
}

// DDLSubscriptions returns the DDL spans the caller must subscribe when
// Config.Source is nil (each from its StartTs: the persisted resolved ts).
func (s *Store) DDLSubscriptions() ([]Subscription, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	return append([]Subscription(nil), s.subs...), nil
}

// Close releases the store file. Calls after Close return ErrStopped.
func (s *Store) Close() error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.closed.Store(true)
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	if s.p == nil {
		return nil
	}
	err := s.p.db.Close()
	s.p = nil
	return err
}

// GetTableDDLEventState reports the store's resolved ts and the FinishedTs
// of the newest DDL that touched the (physical) table.
func (s *Store) GetTableDDLEventState(tableID int64) (DDLEventState, error) {
	if err := s.check(); err != nil {
		return DDLEventState{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return DDLEventState{ResolvedTs: s.h.resolvedTs, MaxEventTs: s.h.maxEventTs(tableID, s.h.resolvedTs)}, nil
}

// RegisterTable records that the caller reads the table from startTs. A
// startTs below the store's GC ts is an error naming both (rule SS41). The
// table need not exist yet: GetTableInfo at startTs tells.
func (s *Store) RegisterTable(tableID int64, startTs uint64) error {
	if err := s.check(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if startTs < s.h.gcTs {
		return &GCError{What: fmt.Sprintf("RegisterTable(%d)", tableID), Ts: startTs, GCTs: s.h.gcTs, GCWhose: "store GC ts"}
	}
	s.tables[tableID] = startTs
	return nil
}

// GetTableInfo returns the logical TableInfo valid at ts for a physical
// table id (a partition id maps to its partitioned table). It never
// blocks: when the store's resolved ts is behind ts it returns a
// *LookupError of kind ErrNotReady (Temporary() == true). The value is
// shared and read-only (see Store).
func (s *Store) GetTableInfo(tableID int64, ts uint64) (*model.TableInfo, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	ti, err := s.h.lookup(tableID, ts)
	s.mu.RUnlock()
	return ti, err
}

// FetchTableTriggerDDLEvents returns the DDL events with FinishedTs in
// (start, end], end being the store's resolved ts, at most limit of them
// (rule SS44 for equal FinishedTs), and the next cursor: the last returned
// FinishedTs for a full batch, else max(start, resolved ts). Events are
// deep copies the caller may keep.
func (s *Store) FetchTableTriggerDDLEvents(start uint64, limit int) ([]DDLEvent, uint64, error) {
	if err := s.check(); err != nil {
		return nil, 0, err
	}
	if limit <= 0 {
		return nil, 0, fmt.Errorf("%w: FetchTableTriggerDDLEvents limit %d, must be > 0", ErrBadInput, limit)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	h := s.h
	if start < h.gcTs {
		return nil, 0, &GCError{What: "FetchTableTriggerDDLEvents", Ts: start, GCTs: h.gcTs, GCWhose: "store GC ts"}
	}
	end := h.resolvedTs
	if start >= end {
		return nil, start, nil
	}
	evs := h.events[h.eventsAfter(start):h.eventsAfter(end)]
	if len(evs) < limit {
		return cloneEvents(evs), end, nil
	}
	cut := limit
	if cut < len(evs) {
		// Never split events with equal FinishedTs across batches: the
		// cursor (next = last FinishedTs) would skip the rest (rule SS44).
		for cut > 0 && evs[cut-1].FinishedTs == evs[cut].FinishedTs {
			cut--
		}
		if cut == 0 {
			cut = limit
			for cut < len(evs) && evs[cut].FinishedTs == evs[limit-1].FinishedTs {
				cut++
			}
		}
	}
	out := cloneEvents(evs[:cut])
	return out, out[len(out)-1].FinishedTs, nil
}

// GC drops history no lookup at or above ts needs (the caller's
// checkpoint). Afterwards lookups and fetches below ts fail with
// ErrBelowGC. ts must not exceed the resolved ts. Rule SS60.
func (s *Store) GC(ts uint64) error {
	if err := s.check(); err != nil {
		return err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	if ts > s.h.resolvedTs {
		s.mu.Unlock()
		return fmt.Errorf("%w: GC ts %d is above the resolved ts %d", ErrBadInput, ts, s.h.resolvedTs)
	}
	if ts <= s.h.gcTs {
		s.mu.Unlock()
		return nil
	}
	g := s.h.gc(ts)
	refs := s.h.referencedInfos()
	s.mu.Unlock()
	if err := s.p.update(func(w *txWriter) error { return w.writeGC(g, refs, ts) }); err != nil {
		s.fail(err)
		return err
	}
	return nil
}

// ResolvedTs returns the store's resolved ts.
func (s *Store) ResolvedTs() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.h == nil {
		return 0
	}
	return s.h.resolvedTs
}

// GCTs returns the lowest ts lookups accept.
func (s *Store) GCTs() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.h == nil {
		return 0
	}
	return s.h.gcTs
}

func cloneEvents(evs []DDLEvent) []DDLEvent {
	if len(evs) == 0 {
		return nil
	}
	out := make([]DDLEvent, len(evs))
	for i := range evs {
		out[i] = evs[i].Clone()
	}
	return out
}

// Clone returns a deep copy of the event.
func (e *DDLEvent) Clone() DDLEvent {
	c := *e
	c.TableInfo = e.TableInfo.Clone()
	if e.MultipleTableInfos != nil {
		c.MultipleTableInfos = make([]*model.TableInfo, len(e.MultipleTableInfos))
		for i, ti := range e.MultipleTableInfos {
			c.MultipleTableInfos[i] = ti.Clone()
		}
	}
	c.NeedDroppedTables = append([]int64(nil), e.NeedDroppedTables...)
	c.NeedAddedTables = append([]AddedTable(nil), e.NeedAddedTables...)
	c.UpdatedSchemas = append([]SchemaIDChange(nil), e.UpdatedSchemas...)
	if e.TableNameChange != nil {
		t := *e.TableNameChange
		t.AddName = append([]SchemaTableName(nil), t.AddName...)
		t.DropName = append([]SchemaTableName(nil), t.DropName...)
		c.TableNameChange = &t
	}
	return c
}
