package emulator

import (
	"encoding/hex"
	"fmt"
	"math"
	"sort"
	"strconv"
	"sync"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/docstore"
	"github.com/searchfabric/sfemu/emulator/text"
	"github.com/searchfabric/sfemu/emulator/vector"
)

// asyncIndex runs one secondary modality (text or vector) behind the
// document store (E51): it applies document changes in ingest order on its
// own goroutine and reports a partition's resolved ts through onMark only
// after every change queued before that mark is indexed.
type asyncIndex struct {
	modality string
	apply    func([]docstore.Change) error
	onMark   func(w *asyncIndex, partition string, ts uint64)

	mu      sync.Mutex
	cond    *sync.Cond
	queue   []work
	busy    bool
	stopped bool
	err     error // first apply error; the modality stops advancing
	done    chan struct{}
	// target is the number of documents a rebuild queued (E58) and
	// applied the number of changes indexed since, for its progress.
	target  int
	applied int
}

type work struct {
	changes   []docstore.Change
	partition string // mark when changes == nil
	ts        uint64
}

func newAsyncIndex(modality string, apply func([]docstore.Change) error, onMark func(*asyncIndex, string, uint64)) *asyncIndex {
	w := &asyncIndex{modality: modality, apply: apply, onMark: onMark, done: make(chan struct{})}
	w.cond = sync.NewCond(&w.mu)
	go w.run()
	return w
}

func (w *asyncIndex) enqueueChanges(ch []docstore.Change) {
	if len(ch) == 0 {
		return
	}
	w.mu.Lock()
	w.queue = append(w.queue, work{changes: ch})
	w.mu.Unlock()
	w.cond.Broadcast()
}

func (w *asyncIndex) enqueueMark(partition string, ts uint64) {
	w.mu.Lock()
	w.queue = append(w.queue, work{partition: partition, ts: ts})
	w.mu.Unlock()
	w.cond.Broadcast()
}

// setRebuildTarget records how many documents a rebuild queued.
func (w *asyncIndex) setRebuildTarget(n int) {
	w.mu.Lock()
	w.target = n
	w.mu.Unlock()
}

// rebuildProgress returns the rebuild's documents indexed and queued.
func (w *asyncIndex) rebuildProgress() (done, total int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return min(w.applied, w.target), w.target
}

// dropQueuedChanges removes every queued change, keeping the marks, and
// returns the removed changes in queue order (TXT-M7's spill: the snapshot
// it indexes already holds them). They count as applied for a rebuild's
// progress.
func (w *asyncIndex) dropQueuedChanges() [][]docstore.Change {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out [][]docstore.Change
	kept := w.queue[:0]
	for _, it := range w.queue {
		if it.changes != nil {
			out = append(out, it.changes)
			w.applied += len(it.changes)
			continue
		}
		kept = append(kept, it)
	}
	w.queue = kept
	return out
}

// stop ends the goroutine without waiting; queued work is dropped.
func (w *asyncIndex) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	w.cond.Broadcast()
}

// waitIdle blocks until the queue is empty and nothing is being applied (or
// the worker stopped).
func (w *asyncIndex) waitIdle() {
	w.mu.Lock()
	for (len(w.queue) > 0 || w.busy) && !w.stopped {
		w.cond.Wait()
	}
	w.mu.Unlock()
}

// queueLen is the number of queued items (for tests).
func (w *asyncIndex) queueLen() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.queue)
}

func (w *asyncIndex) lastErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// maxCoalesce bounds the changes one apply takes from the queue.
const maxCoalesce = 4096

// take removes the next work from the queue: every queued item up to
// maxCoalesce changes (at least one item). Called with mu held.
func (w *asyncIndex) take() []work {
	n, total := 0, 0
	for n < len(w.queue) && (n == 0 || total+len(w.queue[n].changes) <= maxCoalesce) {
		total += len(w.queue[n].changes)
		n++
	}
	items := w.queue[:n:n]
	if n == len(w.queue) {
		w.queue = nil
	} else {
		w.queue = append([]work(nil), w.queue[n:]...)
	}
	return items
}

// run applies the queue. Everything queued when the worker looks (up to
// maxCoalesce changes) is applied as one index batch, so an index that is
// behind catches up with few large batches instead of one per ingested
// batch or per mark; the marks taken with it are reported afterwards, in
// queue order. A mark still means that every change queued before it is
// indexed (E51): changes queued after it may be indexed too.
func (w *asyncIndex) run() {
	defer close(w.done)
	for {
		w.mu.Lock()
		for len(w.queue) == 0 && !w.stopped {
			w.cond.Wait()
		}
		if w.stopped {
			w.mu.Unlock()
			return
		}
		items := w.take()
		w.busy = true
		failed := w.err != nil
		w.mu.Unlock()

		// The change slices are shared (docstore batches own them): one
		// is used as is, several are copied into a new slice.
		var pending []docstore.Change
		total, parts := 0, 0
		for _, it := range items {
			if len(it.changes) > 0 {
				total += len(it.changes)
				parts++
				pending = it.changes
			}
		}
		if parts > 1 {
			pending = make([]docstore.Change, 0, total)
			for _, it := range items {
				pending = append(pending, it.changes...)
			}
		}
		if len(pending) > 0 && !failed {
			if err := w.apply(pending); err != nil {
				failed = true
				w.mu.Lock()
				w.err = fmt.Errorf("%s modality: %w", w.modality, err)
				w.mu.Unlock()
			}
		}
		if !failed {
			for _, it := range items {
				if it.changes == nil {
					w.onMark(w, it.partition, it.ts)
				}
			}
		}

		w.mu.Lock()
		w.busy = false
		if !failed {
			w.applied += len(pending)
		}
		w.mu.Unlock()
		w.cond.Broadcast()
	}
}

// textFields lists the TEXT fields of a definition in definition order.
func textFields(def *apiv1.CollectionDefinition) []string {
	var out []string
	for _, f := range def.GetFields() {
		if f.GetRole() == apiv1.FieldRole_FIELD_ROLE_TEXT {
			out = append(out, f.GetName())
		}
	}
	return out
}

// textApplier turns document changes into text index ops.
func textApplier(idx text.Engine, fields []string) func([]docstore.Change) error {
	return func(changes []docstore.Change) error {
		ops := make([]text.Op, 0, len(changes))
		// One array holds every op's texts: no allocation per row.
		slab := make([]string, len(changes)*len(fields))
		for _, ch := range changes {
			if ch.New == nil || ch.New.Deleted {
				ops = append(ops, text.Op{PK: ch.PK, Delete: true})
				continue
			}
			texts := slab[:len(fields):len(fields)]
			slab = slab[len(fields):]
			has := false
			for i, f := range fields {
				texts[i] = ch.New.Text(f)
				has = has || texts[i] != ""
			}
			if has {
				ops = append(ops, text.Op{PK: ch.PK, Texts: texts})
			} else {
				ops = append(ops, text.Op{PK: ch.PK, Delete: true})
			}
		}
		return idx.Apply(ops)
	}
}

// vectorField is one VECTOR field and its index.
type vectorField struct {
	name string
	idx  *vector.Index
}

func vectorMetric(m apiv1.VectorMetric) vector.Metric {
	if m == apiv1.VectorMetric_VECTOR_METRIC_L2 {
		return vector.L2
	}
	return vector.Cosine
}

// vectorConfig is the comparable identity of a definition's vector setup;
// an index is reused across a schema change only when it is unchanged.
func vectorConfig(def *apiv1.CollectionDefinition) string {
	s := ""
	for _, f := range def.GetFields() {
		if f.GetRole() == apiv1.FieldRole_FIELD_ROLE_VECTOR {
			s += fmt.Sprintf("%s/%d/%d;", f.GetName(), f.GetVectorDim(), vectorMetric(f.GetVectorMetric()))
		}
	}
	return s
}

// vectorApplier turns document changes into vector index upserts/deletes.
// A vector the index cannot hold (a zero vector under cosine) is left out
// of the index: the document stays readable, it just is not a neighbour.
func vectorApplier(fields []*vectorField) func([]docstore.Change) error {
	return func(changes []docstore.Change) error {
		var buf []float32 // the index copies a vector it stores (E45: no Value per row)
		for _, vf := range fields {
			for _, ch := range changes {
				var vec []float32
				if ch.New != nil && !ch.New.Deleted {
					vec = ch.New.Vector(vf.name, buf)
					buf = vec
				}
				if vec == nil {
					vf.idx.Delete(ch.PK)
					continue
				}
				if err := vf.idx.Upsert(ch.PK, vec); err != nil {
					vf.idx.Delete(ch.PK)
				}
			}
		}
		return nil
	}
}

// auxIndex is the metadata_aux modality: exact-match postings over KEYWORD
// fields and a sorted value column over NUMERIC fields, used to narrow
// filtered searches to candidates that the document filter then checks
// exactly. It is applied synchronously with the document store (writers
// hold the emulator's write lock); the numeric columns are re-sorted lazily
// by readers under their own mutex.
type auxIndex struct {
	keyword map[string]map[string]map[string]struct{} // field -> value key -> pks
	numeric map[string]*numericColumn                 // field -> column
}

// numericColumn is a NUMERIC field's values as float64, sorted. float64(x)
// is monotonic in x for int64 and uint64, so ranges over the converted
// values give a superset of the exact matches. It keeps no value per row on
// ingest (E95): until the first range search it is dirty and a write costs
// nothing; after it, a write only records the keys it wrote (changed),
// and the next range search re-reads just those keys' values from the
// documents and merges them in (E97), instead of re-reading and sorting
// every document. Past a quarter of the column's size in recorded keys it
// goes dirty again (the next search rebuilds it whole, as E95 does).
type numericColumn struct {
	mu      sync.Mutex
	dirty   bool
	sorted  []numEntry
	changed []string
	// rebuilds counts whole rebuilds (what E97 saves; read by tests).
	rebuilds int
}

type numEntry struct {
	v  float64
	pk string
}

func newAuxIndex(def *apiv1.CollectionDefinition) *auxIndex {
	a := &auxIndex{keyword: map[string]map[string]map[string]struct{}{}, numeric: map[string]*numericColumn{}}
	for _, f := range def.GetFields() {
		switch f.GetRole() {
		case apiv1.FieldRole_FIELD_ROLE_KEYWORD:
			a.keyword[f.GetName()] = map[string]map[string]struct{}{}
		case apiv1.FieldRole_FIELD_ROLE_NUMERIC:
			switch f.GetType() {
			case apiv1.FieldType_FIELD_TYPE_INT, apiv1.FieldType_FIELD_TYPE_UINT, apiv1.FieldType_FIELD_TYPE_FLOAT, apiv1.FieldType_FIELD_TYPE_BIT:
				a.numeric[f.GetName()] = &numericColumn{dirty: true}
			}
		}
	}
	return a
}

// noteChanges records the keys changes wrote (E97): their values are
// read back from the documents by the next range search. A dirty column
// records nothing (its rebuild reads every document).
func (n *numericColumn) noteChanges(changes []docstore.Change) {
	n.mu.Lock()
	if !n.dirty {
		for _, ch := range changes {
			n.changed = append(n.changed, ch.PK)
		}
		if len(n.changed) > len(n.sorted)/4+1024 {
			n.dirty, n.changed = true, nil
		}
	}
	n.mu.Unlock()
}

// rangeCandidates returns the sorted keys whose value of field lies in
// [lo, hi], sorting the column from docs first when a write made it stale.
// Called with the emulator's lock held (read or write), so docs is not
// written meanwhile.
func (n *numericColumn) rangeCandidates(docs *docstore.Store, field string, lo, hi float64) []string {
	n.mu.Lock()
	if n.dirty {
		n.sorted = n.sorted[:0]
		var sc docstore.Scratch
		docs.Each(func(pk string, ent *docstore.Entry) {
			if ent.Deleted {
				return
			}
			if v := ent.FieldScratch(field, &sc); v != nil && isNumericKind(v) {
				n.sorted = append(n.sorted, numEntry{asFloat(v), pk})
			}
		})
		sort.Slice(n.sorted, func(i, j int) bool { return n.sorted[i].v < n.sorted[j].v })
		n.dirty, n.changed = false, nil
		n.rebuilds++
	} else if len(n.changed) > 0 {
		n.mergeChanged(docs, field)
	}
	i := sort.Search(len(n.sorted), func(i int) bool { return n.sorted[i].v >= lo })
	var out []string
	for ; i < len(n.sorted) && n.sorted[i].v <= hi; i++ {
		out = append(out, n.sorted[i].pk)
	}
	n.mu.Unlock()
	sort.Strings(out)
	return out
}

// mergeChanged brings the written keys up to date (E97): their old
// entries leave the column, their current values (a live document with a
// numeric value) are sorted and merged in.
func (n *numericColumn) mergeChanged(docs *docstore.Store, field string) {
	written := make(map[string]struct{}, len(n.changed))
	for _, pk := range n.changed {
		written[pk] = struct{}{}
	}
	kept := n.sorted[:0]
	for _, e := range n.sorted {
		if _, ok := written[e.pk]; !ok {
			kept = append(kept, e)
		}
	}
	var fresh []numEntry
	var sc docstore.Scratch
	for pk := range written {
		if ent, ok := docs.Get(pk); ok && !ent.Deleted {
			if v := ent.FieldScratch(field, &sc); v != nil && isNumericKind(v) {
				fresh = append(fresh, numEntry{asFloat(v), pk})
			}
		}
	}
	sort.Slice(fresh, func(i, j int) bool { return fresh[i].v < fresh[j].v })
	// Merge from the back, in place: kept and fresh are each sorted.
	i, j := len(kept)-1, len(fresh)-1
	kept = append(kept, fresh...)
	for w := len(kept) - 1; j >= 0; w-- {
		if i >= 0 && kept[i].v > fresh[j].v {
			kept[w] = kept[i]
			i--
		} else {
			kept[w] = fresh[j]
			j--
		}
	}
	n.sorted, n.changed = kept, n.changed[:0]
}

// valueKey renders a scalar value as a posting key; ok is false for
// values that are not indexable (null, vectors).
func valueKey(v *apiv1.Value) (string, bool) {
	switch k := v.GetKind().(type) {
	case *apiv1.Value_StringValue:
		return "s" + k.StringValue, true
	case *apiv1.Value_Int64Value:
		return "n" + strconv.FormatInt(k.Int64Value, 10), true
	case *apiv1.Value_Uint64Value:
		return "n" + strconv.FormatUint(k.Uint64Value, 10), true
	case *apiv1.Value_DoubleValue:
		return "n" + strconv.FormatFloat(k.DoubleValue, 'g', -1, 64), true
	case *apiv1.Value_BoolValue:
		return "b" + strconv.FormatBool(k.BoolValue), true
	case *apiv1.Value_BytesValue:
		return "x" + hex.EncodeToString(k.BytesValue), true
	case *apiv1.Value_JsonValue:
		return "j" + k.JsonValue, true
	}
	return "", false
}

func (a *auxIndex) apply(changes []docstore.Change) {
	if len(changes) > 0 {
		for _, col := range a.numeric {
			col.noteChanges(changes)
		}
	}
	var sc docstore.Scratch // valueKey copies what it keeps
	for field, post := range a.keyword {
		for _, ch := range changes {
			if ch.Old != nil && !ch.Old.Deleted {
				if k, ok := valueKey(ch.Old.FieldScratch(field, &sc)); ok {
					if set := post[k]; set != nil {
						delete(set, ch.PK)
						if len(set) == 0 {
							delete(post, k)
						}
					}
				}
			}
			if ch.New != nil && !ch.New.Deleted {
				if k, ok := valueKey(ch.New.FieldScratch(field, &sc)); ok {
					set := post[k]
					if set == nil {
						set = map[string]struct{}{}
						post[k] = set
					}
					set[ch.PK] = struct{}{}
				}
			}
		}
	}
}

// candidates returns the sorted keys that can match an EQ or IN filter on a
// KEYWORD field; ok is false when the index cannot narrow the filter.
func (a *auxIndex) candidates(docs *docstore.Store, f *apiv1.Filter) ([]string, bool) {
	if col, ok := a.numeric[f.GetField()]; ok && isNumericKind(f.GetValue()) {
		x := asFloat(f.GetValue())
		inf := math.Inf(1)
		switch f.GetOp() {
		case apiv1.FilterOp_FILTER_OP_EQ:
			return col.rangeCandidates(docs, f.GetField(), x, x), true
		case apiv1.FilterOp_FILTER_OP_LT, apiv1.FilterOp_FILTER_OP_LTE:
			return col.rangeCandidates(docs, f.GetField(), -inf, x), true
		case apiv1.FilterOp_FILTER_OP_GT, apiv1.FilterOp_FILTER_OP_GTE:
			return col.rangeCandidates(docs, f.GetField(), x, inf), true
		}
		return nil, false
	}
	post, indexed := a.keyword[f.GetField()]
	if !indexed {
		return nil, false
	}
	var vals []*apiv1.Value
	switch f.GetOp() {
	case apiv1.FilterOp_FILTER_OP_EQ:
		vals = []*apiv1.Value{f.GetValue()}
	case apiv1.FilterOp_FILTER_OP_IN:
		vals = f.GetValues()
	default:
		return nil, false
	}
	seen := map[string]struct{}{}
	for _, v := range vals {
		// Numbers are keyed by their canonical text; a cross-kind numeric
		// match (int 1 vs double 1.0) is not narrowed, so scan instead.
		if _, isD := v.GetKind().(*apiv1.Value_DoubleValue); isD {
			return nil, false
		}
		k, ok := valueKey(v)
		if !ok {
			return nil, false
		}
		for pk := range post[k] {
			seen[pk] = struct{}{}
		}
	}
	out := make([]string, 0, len(seen))
	for pk := range seen {
		out = append(out, pk)
	}
	sort.Strings(out)
	return out, true
}
