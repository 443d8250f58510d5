package emulator

import (
	"fmt"
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
	"github.com/searchfabric/sfemu/emulator/docstore"
	"github.com/searchfabric/sfemu/emulator/storage"
	"github.com/searchfabric/sfemu/emulator/text"
	"github.com/searchfabric/sfemu/schemafence"
)

// Emulator is the search-fabric emulator: the one type the gRPC and HTTP
// layers, the CLI and in-process adapters call. All methods are safe for
// concurrent use; writes are serialised.
type Emulator struct {
	opts Options
	db   *storage.DB // nil in memory mode

	// wmu serialises writers (schema, ingest, progress). mu guards the
	// state readers see; writers hold wmu and take mu only to publish.
	wmu    sync.Mutex
	mu     sync.RWMutex
	colls  map[string]*collection // by name, including dropped ones
	parts  map[string]*apiv1.PartitionState
	idem   map[string]storage.IdemRecord
	closed bool
	broken error // set by a failed commit (E92)
	// notify is closed and replaced whenever a watermark may have moved.
	notify chan struct{}
	// held is the highest safe_ts reported per collection name (E55): a
	// rebuild holds it until the new generation passes it.
	held map[string]uint64
	// indexGate, when set (tests only, under mu), runs before every apply
	// and every watermark mark of an index built by a schema change, so a
	// test can hold a rebuild (an empty one, after REBUILD_FULL, has marks
	// only).
	indexGate func()

	metrics  *metrics
	registry *prometheus.Registry
	vec      *vectorState // memory quota, spill dir, searched set (VEC-Q1, VEC-G5)
}

// collection is the in-memory state of one collection name. rec is the
// catalog record (definition, lineage, state) and is replaced, never
// mutated.
type collection struct {
	rec    *apiv1.CollectionStatus
	schema *contract.Schema
	docs   *docstore.Store
	mods   []apiv1.Modality
	wm     *schemafence.Watermarks

	textFields []string
	textIdx    text.Engine
	textW      *asyncIndex
	vecFields  []*vectorField
	vecConfig  string
	vecW       *asyncIndex
	aux        *auxIndex

	// prevGen answers searches while this generation's text or vector
	// indexes are built beside it (E55); nil once this generation serves.
	prevGen *collection
	// rebuilding lists the async indexes this generation builds from the
	// documents (not the ones it re-uses), for the rebuild progress.
	rebuilding []*asyncIndex
}

func (c *collection) active() bool {
	return c.rec.GetState() == apiv1.CollectionState_COLLECTION_STATE_ACTIVE
}

func (c *collection) name() string { return c.rec.GetDefinition().GetName() }

func (c *collection) has(m apiv1.Modality) bool {
	for _, x := range c.mods {
		if x == m {
			return true
		}
	}
	return false
}

// safeTs is E52 (0 while undefined).
func (c *collection) safeTs() uint64 {
	if c.wm == nil {
		return 0
	}
	s, _ := c.wm.Safe()
	return s
}

// Open opens the emulator. dir "" keeps everything in memory (E62);
// otherwise state is stored in dir and restored (E60, E61). Open returns
// after the text and vector indexes have been rebuilt from the documents.
func Open(dir string, opts Options) (*Emulator, error) {
	switch opts.TextEngine {
	case "", text.EngineMem, text.EngineBleve:
	default:
		return nil, fmt.Errorf("emulator: unknown text engine %q (want %q or %q)", opts.TextEngine, text.EngineMem, text.EngineBleve)
	}
	e := &Emulator{
		opts:   opts.withDefaults(),
		colls:  map[string]*collection{},
		parts:  map[string]*apiv1.PartitionState{},
		idem:   map[string]storage.IdemRecord{},
		notify: make(chan struct{}),
		held:   map[string]uint64{},
	}
	if err := e.initMetrics(); err != nil {
		return nil, err
	}
	e.vec = newVectorState(dir, e.opts)
	if dir == "" {
		return e, nil
	}
	db, err := storage.Open(dir)
	if err != nil {
		return nil, err
	}
	e.db = db
	// Index workers started while loading publish through mu.
	e.mu.Lock()
	err = e.load()
	e.mu.Unlock()
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	e.WaitIndexed()
	return e, nil
}

func (e *Emulator) load() error {
	stores := map[string]*docstore.Store{}
	snap, err := e.db.Load(func(coll, pk string, ent *docstore.Entry) error {
		s := stores[coll]
		if s == nil {
			s = docstore.New()
			stores[coll] = s
		}
		s.Put(pk, ent)
		return nil
	})
	if err != nil {
		return err
	}
	e.idem = snap.Idempotency
	for _, ps := range snap.Partitions {
		e.parts[ps.GetSourcePartition()] = ps
	}
	for _, rec := range snap.Collections {
		name := rec.GetDefinition().GetName()
		if rec.GetState() != apiv1.CollectionState_COLLECTION_STATE_ACTIVE {
			e.colls[name] = &collection{rec: rec}
			continue
		}
		docs := stores[name]
		if docs == nil {
			docs = docstore.New()
		}
		c, err := e.buildCollection(rec, docs, nil)
		if err != nil {
			return fmt.Errorf("emulator: restore collection %q: %w", name, err)
		}
		e.colls[name] = c
	}
	for name, ps := range e.parts {
		if c := e.colls[ps.GetCollection()]; c == nil || !c.active() {
			return fmt.Errorf("emulator: stored partition %q maps to %q, which is not an active collection", name, ps.GetCollection())
		}
	}
	return nil
}

// buildCollection assembles the in-memory state of an active collection
// around docs. prev, when not nil, is the previous state of the same name
// whose secondary indexes may be reused (ADDITIVE changes, E53). addedAt
// handling for partitions is done by the caller through e.parts.
func (e *Emulator) buildCollection(rec *apiv1.CollectionStatus, docs *docstore.Store, prev *collection) (*collection, error) {
	def := rec.GetDefinition()
	c := &collection{
		rec:    rec,
		schema: contract.NewSchema(def),
		docs:   docs,
		mods:   contract.Modalities(def),
	}
	names := make([]string, len(c.mods))
	for i, m := range c.mods {
		names[i] = contract.ModalityName(m)
	}
	wm, err := schemafence.NewWatermarks(def.GetSourcePartitions(), names)
	if err != nil {
		return nil, err
	}
	c.wm = wm
	reuse := prev != nil && prev.active() &&
		rec.GetLineage().GetLastUpdatePolicy() == apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_ADDITIVE

	// Synchronous modalities follow the stored partition progress.
	if c.has(apiv1.Modality_MODALITY_METADATA_AUX) {
		c.aux = newAuxIndex(def)
		all := make([]docstore.Change, 0, docs.Live())
		docs.Each(func(pk string, ent *docstore.Entry) {
			if !ent.Deleted {
				all = append(all, docstore.Change{PK: pk, New: ent})
			}
		})
		c.aux.apply(all)
	}
	for _, p := range def.GetSourcePartitions() {
		ps := e.parts[p]
		if ps == nil || ps.GetResolvedTs() == 0 {
			continue
		}
		for _, m := range []apiv1.Modality{apiv1.Modality_MODALITY_DOCUMENT, apiv1.Modality_MODALITY_METADATA_AUX} {
			if c.has(m) {
				if err := c.wm.Advance(contract.ModalityName(m), p, ps.GetResolvedTs()); err != nil {
					return nil, err
				}
			}
		}
	}

	// Text.
	if c.has(apiv1.Modality_MODALITY_TEXT) {
		fields := textFields(def)
		if reuse && prev.textIdx != nil && equalStrings(prev.textFields, fields) {
			// Shared with prev, which may still serve searches (E55);
			// retireGen leaves what the next generation uses open.
			c.textFields, c.textIdx, c.textW = prev.textFields, prev.textIdx, prev.textW
			e.seedAsync(c, prev, apiv1.Modality_MODALITY_TEXT, c.textW)
		} else {
			idx, err := text.OpenEngine(e.opts.TextEngine, e.opts.TextScratchDir, fields)
			if err != nil {
				return nil, err
			}
			slot := &textSlot{eng: idx}
			c.textFields, c.textIdx = fields, slot
			sp := e.newTextSpill(def.GetName(), slot, fields, docs)
			c.textW = newAsyncIndex(contract.ModalityName(apiv1.Modality_MODALITY_TEXT), e.gated(sp.run), e.gatedMark(e.onIndexMark))
			sp.w = c.textW
			c.rebuilding = append(c.rebuilding, c.textW)
			e.rebuildAsync(c, c.textW)
		}
	}
	// Vector.
	if c.has(apiv1.Modality_MODALITY_VECTOR) {
		cfg := vectorConfig(def)
		if reuse && prev.vecW != nil && prev.vecConfig == cfg {
			c.vecFields, c.vecConfig, c.vecW = prev.vecFields, prev.vecConfig, prev.vecW
			e.seedAsync(c, prev, apiv1.Modality_MODALITY_VECTOR, c.vecW)
		} else {
			vfs, err := e.newVectorFields(def, prev)
			if err != nil {
				return nil, err
			}
			c.vecFields, c.vecConfig = vfs, cfg
			c.vecW = newAsyncIndex(contract.ModalityName(apiv1.Modality_MODALITY_VECTOR), e.gated(vectorApplier(vfs)), e.gatedMark(e.onIndexMark))
			c.rebuilding = append(c.rebuilding, c.vecW)
			e.rebuildAsync(c, c.vecW)
		}
	}
	return c, nil
}

// gated wraps an index apply with the test hook that holds rebuilds.
func (e *Emulator) gated(apply func([]docstore.Change) error) func([]docstore.Change) error {
	g := e.indexGate
	if g == nil {
		return apply
	}
	return func(ch []docstore.Change) error {
		g()
		return apply(ch)
	}
}

// gatedMark is gated for a rebuilding index's watermark marks.
func (e *Emulator) gatedMark(mark func(*asyncIndex, string, uint64)) func(*asyncIndex, string, uint64) {
	g := e.indexGate
	if g == nil {
		return mark
	}
	return func(w *asyncIndex, partition string, ts uint64) {
		g()
		mark(w, partition, ts)
	}
}

// rebuildAsync queues every live document, in chunks of maxCoalesce so a
// rebuild is applied as bounded index batches and reports its progress, and
// then one mark per reported partition, so the modality catches up with the
// document store (E61).
func (e *Emulator) rebuildAsync(c *collection, w *asyncIndex) {
	keys := c.docs.Keys()
	w.setRebuildTarget(len(keys))
	for len(keys) > 0 {
		n := min(len(keys), maxCoalesce)
		chunk := make([]docstore.Change, 0, n)
		for _, pk := range keys[:n] {
			ent, _ := c.docs.Get(pk)
			chunk = append(chunk, docstore.Change{PK: pk, New: ent})
		}
		w.enqueueChanges(chunk)
		keys = keys[n:]
	}
	for _, p := range c.rec.GetDefinition().GetSourcePartitions() {
		if ps := e.parts[p]; ps != nil && ps.GetResolvedTs() > 0 {
			w.enqueueMark(p, ps.GetResolvedTs())
		}
	}
}

// seedAsync carries a reused modality's per-partition progress into the new
// watermarks and marks partitions the new definition added.
func (e *Emulator) seedAsync(c, prev *collection, m apiv1.Modality, w *asyncIndex) {
	name := contract.ModalityName(m)
	for _, p := range c.rec.GetDefinition().GetSourcePartitions() {
		if v, ok := prev.wm.PartitionApplied(name, p); ok {
			_ = c.wm.Advance(name, p, v)
		} else if ps := e.parts[p]; ps != nil && ps.GetResolvedTs() > 0 {
			w.enqueueMark(p, ps.GetResolvedTs())
		}
	}
}

// onIndexMark is called by an async modality when it has indexed every
// change of partition up to ts.
func (e *Emulator) onIndexMark(w *asyncIndex, partition string, ts uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ps := e.parts[partition]
	if ps == nil || e.closed {
		return // Close owns the generations now
	}
	c := e.colls[ps.GetCollection()]
	if c == nil || (c.textW != w && c.vecW != w) {
		return // the worker was replaced by a schema change
	}
	// Marks are queued in resolved-ts order per partition; an error here
	// would mean a bug in that ordering and is surfaced through lastErr.
	if err := c.wm.Advance(w.modality, partition, ts); err != nil {
		w.mu.Lock()
		if w.err == nil {
			w.err = err
		}
		w.mu.Unlock()
	}
	e.settleLocked(c)
	e.bumpLocked()
}

// logf writes an operational message (Options.Logf).
func (e *Emulator) logf(format string, args ...any) { e.opts.Logf(format, args...) }

// bumpLocked wakes every read waiting for freshness.
func (e *Emulator) bumpLocked() {
	close(e.notify)
	e.notify = make(chan struct{})
}

// WaitIndexed blocks until every text and vector modality has applied
// everything queued so far. For tests, benchmarks and tools; reads do not
// need it (they wait on safe_ts).
func (e *Emulator) WaitIndexed() {
	e.mu.RLock()
	var ws []*asyncIndex
	for _, c := range e.colls {
		for _, g := range []*collection{c, c.prevGen} {
			if g == nil {
				continue
			}
			if g.textW != nil {
				ws = append(ws, g.textW)
			}
			if g.vecW != nil {
				ws = append(ws, g.vecW)
			}
		}
	}
	e.mu.RUnlock()
	for _, w := range ws {
		w.waitIdle()
	}
}

// Close stops the modalities and closes the store. Further calls fail with
// CLOSED.
func (e *Emulator) Close() error {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	colls := make([]*collection, 0, len(e.colls))
	for _, c := range e.colls {
		colls = append(colls, c)
	}
	e.bumpLocked()
	e.mu.Unlock()
	for _, c := range colls {
		if c.prevGen != nil {
			closeGen(c.prevGen, c)
		}
		closeGen(c)
	}
	if e.db != nil {
		return e.db.Close()
	}
	return nil
}

// writableLocked is checked under wmu by every write.
func (e *Emulator) writableLocked() error {
	if e.closed {
		return contract.Errf(contract.ReasonClosed, "", "an open emulator", "closed", "emulator is closed")
	}
	if e.broken != nil {
		return contract.Errf(contract.ReasonClosed, "", "a healthy store", "failed", "emulator refuses writes after a storage failure: %v", e.broken)
	}
	return nil
}

// persist runs fn in one durable transaction (E60). A failure marks the
// emulator broken (E92).
func (e *Emulator) persist(fn func(*storage.Tx) error) error {
	if e.db == nil {
		return nil
	}
	if err := e.db.Update(fn); err != nil {
		e.broken = err
		return contract.Errf(contract.ReasonInternal, "", "", "", "storage commit failed: %v", err)
	}
	return nil
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func sortedKeys[M ~map[string]V, V any](m M) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// clonePartition copies a partition state so stored records are immutable.
func clonePartition(ps *apiv1.PartitionState) *apiv1.PartitionState {
	return proto.Clone(ps).(*apiv1.PartitionState)
}
