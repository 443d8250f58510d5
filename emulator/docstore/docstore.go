// Package docstore is the document modality's in-memory state: one entry per
// primary key holding either the live document or its tombstone, each with
// the commit_ts version that guards it (specs/emulator-contract.md E38..E40).
//
// Changes are planned in a Batch (an overlay that sees its own earlier
// writes) and become visible only by Commit, so the emulator can persist a
// batch first and apply it to memory only when the disk write succeeded.
// A Store is not safe for concurrent use; the emulator serialises access:
// writers alone, readers (Get, Keys, Ascend) together.
package docstore

import (
	"container/heap"
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
)

// Entry is the stored state of one primary key. Entries are immutable once
// committed: a change replaces the pointer.
//
// A live entry's row image has one of two forms: Layout + Row, the compact
// row (E45: the values in layout order as one byte slice, what the
// emulator keeps for every document it ingests or loads), or Fields, a map
// as the canonical Mutation carries it (entries built by hand, e.g. in
// tests). Readers go through Field, FieldScratch, Text, Range, NumFields
// and FieldMap, which serve both forms alike.
type Entry struct {
	// Version is the commit_ts of the mutation that produced this state.
	Version uint64
	// Deleted marks a tombstone.
	Deleted bool
	// Fields is the row image of the map form (nil for tombstones and
	// compact entries). Shared, read-only.
	Fields map[string]*apiv1.Value
	// Layout names Row's slots; Row holds slot i's value encoded (see
	// row.go), or an absent mark when the row does not carry the field.
	// Shared, read-only: strings read from it alias its bytes.
	Layout *contract.Layout
	Row    []byte
	// Partition is the source partition of the last upsert (E40).
	Partition string
}

// NewRowEntry is the compact live entry of vals (vals[i] is the value of
// layout.Names[i], nil = not carried).
func NewRowEntry(version uint64, layout *contract.Layout, vals []*apiv1.Value, partition string) (*Entry, error) {
	row, err := EncodeRow(make([]byte, 0, rowSize(vals)), vals)
	if err != nil {
		return nil, err
	}
	return &Entry{Version: version, Layout: layout, Row: row, Partition: partition}, nil
}

// NewMapEntry is the compact live entry of a canonical fields map laid out
// by layout, which must name every field of fields.
func NewMapEntry(version uint64, layout *contract.Layout, fields map[string]*apiv1.Value, partition string) (*Entry, error) {
	vals := make([]*apiv1.Value, len(layout.Names))
	for name, v := range fields {
		i := layout.Index(name)
		if i < 0 {
			return nil, fmt.Errorf("field %q is not in the layout", name)
		}
		if v == nil {
			v = &apiv1.Value{} // a nil map value reads as an unset Value
		}
		vals[i] = v
	}
	return NewRowEntry(version, layout, vals, partition)
}

// rowSize is the exact length of the compact row of vals, so the row gets
// its own exact-size allocation in one pass.
func rowSize(vals []*apiv1.Value) int {
	n := 0
	for _, v := range vals {
		switch k := v.GetKind().(type) {
		case *apiv1.Value_StringValue:
			n += 1 + uvarintLen(uint64(len(k.StringValue))) + len(k.StringValue)
		case *apiv1.Value_JsonValue:
			n += 1 + uvarintLen(uint64(len(k.JsonValue))) + len(k.JsonValue)
		case *apiv1.Value_BytesValue:
			n += 1 + uvarintLen(uint64(len(k.BytesValue))) + len(k.BytesValue)
		case *apiv1.Value_VectorValue:
			n += 1 + uvarintLen(uint64(len(k.VectorValue.GetValues()))) + 4*len(k.VectorValue.GetValues())
		case *apiv1.Value_DoubleValue:
			n += 9
		case *apiv1.Value_Int64Value:
			x := k.Int64Value
			n += 1 + uvarintLen(uint64(x<<1)^uint64(x>>63)) // zigzag, as binary.AppendVarint
		case *apiv1.Value_Uint64Value:
			n += 1 + uvarintLen(k.Uint64Value)
		case *apiv1.Value_BoolValue:
			n += 2
		default: // absent, null, unset
			n++
		}
	}
	return n
}

func uvarintLen(n uint64) int {
	l := 1
	for ; n >= 0x80; n >>= 7 {
		l++
	}
	return l
}

// slotOf is the encoded slot of field name in a compact entry, nil when
// the layout has no such field.
func (e *Entry) slotOf(name string) []byte {
	i := e.Layout.Index(name)
	if i < 0 {
		return nil
	}
	return slot(e.Row, i)
}

// Field returns the value of field name, nil when the row has none. For
// a compact entry the Value is new (strings alias the row).
func (e *Entry) Field(name string) *apiv1.Value {
	return e.FieldScratch(name, nil)
}

// FieldScratch is Field, filling sc instead of allocating when sc is not
// nil: the result is then valid until the next use of sc.
func (e *Entry) FieldScratch(name string, sc *Scratch) *apiv1.Value {
	if e.Layout == nil {
		return e.Fields[name]
	}
	s := e.slotOf(name)
	if s == nil {
		return nil
	}
	return decodeSlot(s, sc)
}

// Text is the string or JSON text of field name ("" for anything else),
// without materialising a Value.
func (e *Entry) Text(name string) string {
	if e.Layout == nil {
		v := e.Fields[name]
		if j, ok := v.GetKind().(*apiv1.Value_JsonValue); ok {
			return j.JsonValue
		}
		return v.GetStringValue()
	}
	s := e.slotOf(name)
	if s == nil || (s[0] != KindString && s[0] != KindJSON) {
		return ""
	}
	return str(payload(s))
}

// Vector is the vector of field name appended to buf[:0] (nil when the
// field holds no vector): an indexer that copies what it is given reads a
// vector per row without allocating one.
func (e *Entry) Vector(name string, buf []float32) []float32 {
	if e.Layout == nil {
		vv := e.Fields[name].GetVectorValue()
		if vv == nil {
			return nil
		}
		return append(buf[:0], vv.GetValues()...)
	}
	s := e.slotOf(name)
	if s == nil || s[0] != KindVector {
		return nil
	}
	n, w := binary.Uvarint(s[1:])
	raw := s[1+w:]
	out := buf[:0]
	for i := 0; i < int(n); i++ {
		out = append(out, math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])))
	}
	return out
}

// NumFields is the number of fields the row carries.
func (e *Entry) NumFields() int {
	if e.Layout == nil {
		return len(e.Fields)
	}
	n := 0
	for off := 0; off < len(e.Row); off += slotLen(e.Row[off:]) {
		if e.Row[off] != kindAbsent {
			n++
		}
	}
	return n
}

// RangeEncoded calls fn with the encoded value of every field a compact
// row carries, in layout order, until fn returns false; it reports
// whether the entry is compact (a map-form entry calls nothing).
func (e *Entry) RangeEncoded(fn func(name string, enc []byte) bool) bool {
	if e.Layout == nil {
		return false
	}
	for i, off := 0, 0; off < len(e.Row); i++ {
		n := slotLen(e.Row[off:])
		if e.Row[off] != kindAbsent && !fn(e.Layout.Names[i], e.Row[off:off+n]) {
			break
		}
		off += n
	}
	return true
}

// Range calls fn for every field the row carries (map form: in no
// particular order; compact: in layout order) until fn returns false.
func (e *Entry) Range(fn func(name string, v *apiv1.Value) bool) {
	if e.RangeEncoded(func(name string, enc []byte) bool { return fn(name, decodeSlot(enc, nil)) }) {
		return
	}
	for name, v := range e.Fields {
		if !fn(name, v) {
			return
		}
	}
}

// FieldMap is the row image as the canonical map (the API's Document
// fields): the map form's own map, or a new map of the decoded values.
func (e *Entry) FieldMap() map[string]*apiv1.Value {
	if e.Layout == nil {
		return e.Fields
	}
	m := make(map[string]*apiv1.Value, len(e.Layout.Names))
	e.Range(func(name string, v *apiv1.Value) bool {
		m[name] = v
		return true
	})
	return m
}

// Store holds every entry of one collection.
type Store struct {
	m     map[string]*Entry
	live  int
	tombs tombHeap
	// spareIdx is the key index of the last committed batch, cleared and
	// reused by the next one (a batch plans every row of an ingest).
	spareIdx map[string]int
	// ord serves keys in order to scans and filtered searches (E94).
	ord keyOrder
}

// New returns an empty store.
func New() *Store { return &Store{m: make(map[string]*Entry)} }

// Get returns the entry for pk (live or tombstone).
func (s *Store) Get(pk string) (*Entry, bool) {
	e, ok := s.m[pk]
	return e, ok
}

// Live returns the number of live documents.
func (s *Store) Live() int { return s.live }

// Tombstones returns the number of tombstones.
func (s *Store) Tombstones() int { return len(s.m) - s.live }

// Put stores e for pk directly (used when loading from disk and by
// rebuilds); it bypasses the version guard.
func (s *Store) Put(pk string, e *Entry) {
	old, had := s.m[pk]
	if had && !old.Deleted {
		s.live--
	}
	if !had {
		s.ord.noteInsert(pk)
	}
	s.m[pk] = e
	if e.Deleted {
		heap.Push(&s.tombs, tomb{version: e.Version, pk: pk})
	} else {
		s.live++
	}
}

// Remove forgets pk entirely.
func (s *Store) Remove(pk string) {
	if old, had := s.m[pk]; had {
		if !old.Deleted {
			s.live--
		}
		delete(s.m, pk)
		s.ord.noteRemove()
	}
}

// Keys returns every primary key with a live document, sorted.
func (s *Store) Keys() []string {
	out := make([]string, 0, s.live)
	s.Ascend("", func(pk string, _ *Entry) bool {
		out = append(out, pk)
		return true
	})
	return out
}

// Ascend calls fn with every live document whose key is after `after`
// ("" = from the first), in ascending key order, until fn returns false.
// A page of a scan costs the page, not a sort of every key (E94).
// Safe for concurrent readers; writers must not run meanwhile.
func (s *Store) Ascend(after string, fn func(pk string, e *Entry) bool) {
	s.ord.ascend(s.m, after, func(pk string, e *Entry) bool {
		return e.Deleted || fn(pk, e)
	})
}

// Each calls fn for every entry (live and tombstones) in no particular order.
func (s *Store) Each(fn func(pk string, e *Entry)) {
	for k, e := range s.m {
		fn(k, e)
	}
}

// Change is the net effect of a batch on one key.
type Change struct {
	PK  string
	Old *Entry // nil when the key had no entry
	New *Entry
}

// Batch plans a sequence of mutations against a store.
type Batch struct {
	s       *Store
	idx     map[string]int // pk -> index into changes
	changes []Change
	// Applied counts mutations that changed state; Stale those skipped by
	// the version guard.
	Applied, Stale int
}

// NewBatch starts planning against s.
func (s *Store) NewBatch(sizeHint int) *Batch {
	idx := s.spareIdx
	s.spareIdx = nil
	if idx == nil {
		idx = make(map[string]int, sizeHint)
	}
	return &Batch{s: s, idx: idx, changes: make([]Change, 0, sizeHint)}
}

func (b *Batch) current(pk string) *Entry {
	if i, ok := b.idx[pk]; ok {
		return b.changes[i].New
	}
	return b.s.m[pk]
}

func (b *Batch) set(pk string, e *Entry) {
	if i, ok := b.idx[pk]; ok {
		b.changes[i].New = e
		return
	}
	pk = strings.Clone(pk) // E93
	b.idx[pk] = len(b.changes)
	b.changes = append(b.changes, Change{PK: pk, Old: b.s.m[pk], New: e})
}

// Upsert applies the version guard (E38) to an upsert. It reports whether
// state changed.
func (b *Batch) Upsert(pk string, commitTs uint64, fields map[string]*apiv1.Value, partition string) bool {
	return b.put(pk, &Entry{Version: commitTs, Fields: fields, Partition: partition})
}

// UpsertRow is Upsert of a positional row: vals[i] is the value of
// layout.Names[i] (nil = not carried). The row is stored compact (E45).
func (b *Batch) UpsertRow(pk string, commitTs uint64, layout *contract.Layout, vals []*apiv1.Value, partition string) (bool, error) {
	e, err := NewRowEntry(commitTs, layout, vals, partition)
	if err != nil {
		return false, err
	}
	return b.put(pk, e), nil
}

// UpsertMap is Upsert of a canonical fields map, stored compact (E45) in
// layout (which names every field of fields).
func (b *Batch) UpsertMap(pk string, commitTs uint64, layout *contract.Layout, fields map[string]*apiv1.Value, partition string) (bool, error) {
	e, err := NewMapEntry(commitTs, layout, fields, partition)
	if err != nil {
		return false, err
	}
	return b.put(pk, e), nil
}

// put is the version guard and the plan of an upsert, with one lookup of
// pk in the batch and at most one in the store: it runs once per row.
func (b *Batch) put(pk string, e *Entry) bool {
	i, inBatch := b.idx[pk]
	var cur *Entry
	if inBatch {
		cur = b.changes[i].New
	} else {
		cur = b.s.m[pk]
	}
	if cur != nil && e.Version < cur.Version {
		b.Stale++
		return false
	}
	if inBatch {
		b.changes[i].New = e
	} else {
		pk = strings.Clone(pk) // E93
		b.idx[pk] = len(b.changes)
		b.changes = append(b.changes, Change{PK: pk, Old: cur, New: e})
	}
	b.Applied++
	return true
}

// Delete applies the version guard (E38) to a delete, leaving a tombstone.
func (b *Batch) Delete(pk string, commitTs uint64) bool {
	cur := b.current(pk)
	// At an equal version the delete is stale whether the key is live or a
	// tombstone: one transaction writes one final mutation per key and
	// partition, so a delete and an upsert of one primary key at one
	// commit_ts come from a row that moved between partitions (delete in the
	// old, insert in the new) and the row must survive in whatever order the
	// two partitions' batches arrive.
	if cur != nil && commitTs <= cur.Version {
		b.Stale++
		return false
	}
	b.set(pk, &Entry{Version: commitTs, Deleted: true})
	b.Applied++
	return true
}

// Changes returns the net change per key in first-touch order. The slice
// is owned by the batch; do not modify it. A change's PK is the batch's
// own copy of the key it was given (E93): the store's map, its tombstone
// heap and every modality keep it for as long as the document lives, and
// a caller's key is often a substring of a whole request buffer (the
// adapter's batches carve every key and value from one string), which a
// kept substring would hold alive in full.
func (b *Batch) Changes() []Change { return b.changes }

// Commit makes the batch's changes visible.
// The batch is spent: it must not be used afterwards.
func (s *Store) Commit(b *Batch) {
	for _, ch := range b.changes {
		// The store still holds ch.Old for the key (a batch is planned
		// and committed under the emulator's writer lock): no lookup.
		if ch.Old != nil && !ch.Old.Deleted {
			s.live--
		}
		if ch.Old == nil {
			s.ord.noteInsert(ch.PK)
		}
		s.m[ch.PK] = ch.New
		if ch.New.Deleted {
			heap.Push(&s.tombs, tomb{version: ch.New.Version, pk: ch.PK})
		} else {
			s.live++
		}
	}
	// A map never shrinks: the index of a huge batch is not kept.
	if b.idx != nil && len(b.idx) <= maxSpareIdx {
		clear(b.idx)
		s.spareIdx = b.idx
	}
	b.idx = nil
}

// maxSpareIdx is the largest batch key index Commit keeps for reuse.
const maxSpareIdx = 64 << 10

// CollectTombstones returns the keys whose tombstone version is <= horizon
// (E39) and forgets them. Stale heap records (the key was rewritten since)
// are discarded on the way.
func (s *Store) CollectTombstones(horizon uint64) []string {
	var out []string
	for s.tombs.Len() > 0 && s.tombs[0].version <= horizon {
		t := heap.Pop(&s.tombs).(tomb)
		if e, ok := s.m[t.pk]; ok && e.Deleted && e.Version == t.version {
			delete(s.m, t.pk)
			s.ord.noteRemove()
			out = append(out, t.pk)
		}
	}
	return out
}

type tomb struct {
	version uint64
	pk      string
}

type tombHeap []tomb

func (h tombHeap) Len() int { return len(h) }
func (h tombHeap) Less(i, j int) bool {
	if h[i].version != h[j].version {
		return h[i].version < h[j].version
	}
	return h[i].pk < h[j].pk
}
func (h tombHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *tombHeap) Push(x any)   { *h = append(*h, x.(tomb)) }
func (h *tombHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}
