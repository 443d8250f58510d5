package normalize

import (
	"math"
	"unsafe"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
	"github.com/searchfabric/sfemu/emulator/docstore"
	"github.com/searchfabric/sfemu/reorder"
)

// seqCounter is one partition's sequence state within an epoch (N6).
type seqCounter struct {
	epoch uint64
	next  uint64 // next seq to assign, from 1
}

// assign hands out n consecutive seqs and returns the first.
func (s *seqCounter) assign(n int) uint64 {
	first := s.next
	s.next += uint64(n)
	return first
}

// cutPoints returns the end index (exclusive) of each batch over n
// sequenced mutations (N21): a batch ends after maxRows mutations, before
// a mutation that would take it past maxBytes (sizeOf estimates a
// mutation's wire size; a batch always holds at least one mutation), and
// wherever the generation token changes. sizeOf may be nil (no byte
// bound). dst is reused.
func cutPoints(n, maxRows int, maxBytes int64, sizeOf func(i int) int64, genOf func(i int) string, dst []int) []int {
	dst = dst[:0]
	start := 0
	var bytes int64
	if sizeOf != nil && n > 0 {
		bytes = sizeOf(0)
	}
	for i := 1; i <= n; i++ {
		var sz int64
		if sizeOf != nil && i < n {
			sz = sizeOf(i)
		}
		if i == n || i-start >= maxRows || (sizeOf != nil && bytes+sz > maxBytes) || genOf(i) != genOf(start) {
			dst = append(dst, i)
			start = i
			bytes = 0
		}
		bytes += sz
	}
	return dst
}

// wireSize is an upper estimate of the mutation's encoded size in a
// MutationBatch: its bytes (values and key) plus, per field, the field
// name and the map entry, Value and number overhead.
func (m *Mutation) wireSize() int64 {
	n := int64(len(m.data)) + 32
	if m.vals != nil {
		n += m.shape.WireOverhead
	}
	return n
}

// protoAlloc builds the protobuf values of one batch out of a few large
// slices instead of one allocation per value.
type protoAlloc struct {
	vals    []apiv1.Value
	ints    []apiv1.Value_Int64Value
	uints   []apiv1.Value_Uint64Value
	floats  []apiv1.Value_DoubleValue
	strs    []apiv1.Value_StringValue
	bytes   []apiv1.Value_BytesValue
	jsons   []apiv1.Value_JsonValue
	nulls   []apiv1.Value_NullValue
	vectors []apiv1.Value_VectorValue
	fvecs   []apiv1.FloatVector
	f32s    []float32 // the vectors' components, carved like the values
	muts    []apiv1.Mutation
	ptrs    []*apiv1.Value // positional rows' value slots (E44)
}

const protoChunk = 256

func take[T any](s *[]T) *T {
	if len(*s) == cap(*s) {
		*s = make([]T, 0, protoChunk)
	}
	*s = (*s)[:len(*s)+1]
	return &(*s)[len(*s)-1]
}

// header is a mutation without its values: what toProto and toRow share.
func (a *protoAlloc) header(m *Mutation, seq uint64, all string) *apiv1.Mutation {
	pm := take(&a.muts)
	pm.Seq = seq
	pm.CommitTs = m.CommitTs
	pm.Kind = m.Kind
	pm.PrimaryKey = all[m.pkOff:]
	return pm
}

// toProto builds the wire mutation. all is a copy of m.data (a slice of
// the batch's one immutable copy, see batchBuilder.build), so the proto never
// aliases slab memory.
func (a *protoAlloc) toProto(m *Mutation, seq uint64, all string, allBytes []byte) *apiv1.Mutation {
	pm := a.header(m, seq, all)
	if m.Kind == apiv1.MutationKind_MUTATION_KIND_DELETE {
		return pm
	}
	pm.Fields = make(map[string]*apiv1.Value, len(m.vals))
	for i := range m.vals {
		pm.Fields[m.shape.Fields[i].Name] = a.value(m, &m.vals[i], all, allBytes)
	}
	return pm
}

// toRow is toProto for a positional batch (E44): the mutation without a
// fields map, and its values in the shape's layout order (nil for a
// delete), carved from one slab of slots.
func (a *protoAlloc) toRow(m *Mutation, seq uint64, all string, allBytes []byte) (*apiv1.Mutation, []*apiv1.Value) {
	pm := a.header(m, seq, all)
	if m.Kind == apiv1.MutationKind_MUTATION_KIND_DELETE {
		return pm, nil
	}
	n := len(m.vals)
	if cap(a.ptrs)-len(a.ptrs) < n {
		a.ptrs = make([]*apiv1.Value, 0, max(protoChunk*8, n))
	}
	vals := a.ptrs[len(a.ptrs) : len(a.ptrs)+n : len(a.ptrs)+n]
	a.ptrs = a.ptrs[:len(a.ptrs)+n]
	for i := range m.vals {
		vals[i] = a.value(m, &m.vals[i], all, allBytes)
	}
	return pm, vals
}

// value builds the protobuf value of v, a value of m.
func (a *protoAlloc) value(m *Mutation, v *ownedVal, all string, allBytes []byte) *apiv1.Value {
	pv := take(&a.vals)
	switch v.kind {
	case vNull:
		w := take(&a.nulls)
		w.NullValue = true
		pv.Kind = w
	case vInt:
		w := take(&a.ints)
		w.Int64Value = int64(v.num)
		pv.Kind = w
	case vUint:
		w := take(&a.uints)
		w.Uint64Value = v.num
		pv.Kind = w
	case vFloat:
		w := take(&a.floats)
		w.DoubleValue = math.Float64frombits(v.num)
		pv.Kind = w
	case vString:
		w := take(&a.strs)
		w.StringValue = all[v.off : v.off+v.n]
		pv.Kind = w
	case vJSON:
		w := take(&a.jsons)
		w.JsonValue = all[v.off : v.off+v.n]
		pv.Kind = w
	case vBytes:
		w := take(&a.bytes)
		w.BytesValue = allBytes[v.off : v.off+v.n : v.off+v.n]
		pv.Kind = w
	case vVector:
		b := m.data[v.off : v.off+v.n]
		n := len(b) / 4
		if cap(a.f32s)-len(a.f32s) < n {
			a.f32s = make([]float32, 0, max(protoChunk*4, n))
		}
		fv := take(&a.fvecs)
		fv.Values = a.f32s[len(a.f32s) : len(a.f32s)+n : len(a.f32s)+n]
		a.f32s = a.f32s[:len(a.f32s)+n]
		for j := range fv.Values {
			fv.Values[j] = math.Float32frombits(uint32(b[4*j]) | uint32(b[4*j+1])<<8 | uint32(b[4*j+2])<<16 | uint32(b[4*j+3])<<24)
		}
		w := take(&a.vectors)
		w.VectorValue = fv
		pv.Kind = w
	}
	return pv
}

// batchBuilder turns a drained, canonical run of one partition into
// batches (N21): seqs assigned in order from the counter (N6), one token.
type batchBuilder struct {
	partition, collection, token string
	seq                          *seqCounter
	alloc                        *protoAlloc
	// positional builds rows (E44) for a sink that takes them.
	positional bool
}

// build builds the batch of items (the next seqs) and releases the items'
// slab memory: the protobufs hold copies of every byte. rows is non-nil
// when the batch was built positionally.
func (bb *batchBuilder) build(items []reorder.Item[Mutation]) (*apiv1.MutationBatch, *contract.Rows) {
	first := bb.seq.assign(len(items))
	b := &apiv1.MutationBatch{
		SourcePartition:       bb.partition,
		SourceEpoch:           bb.seq.epoch,
		FirstSeq:              first,
		SchemaGenerationToken: bb.token,
		Collection:            bb.collection,
	}
	rows := bb.alloc.assembleRows(b, len(items), func(i int) *Mutation { return &items[i].Value }, bb.positional)
	for i := range items {
		items[i].Value.release()
	}
	return b, rows
}

// assemble fills b's mutations (seqs from b.FirstSeq) from the n
// mutations mut returns, over one immutable copy of all their bytes that
// the protobufs slice. With positional, and when every upsert has one
// shape, it returns the values as rows (E44) and leaves the mutations'
// fields maps empty; otherwise it builds the maps and returns nil.
func (a *protoAlloc) assemble(b *apiv1.MutationBatch, n int, mut func(i int) *Mutation, positional bool) *contract.Rows {
	var sh *shape
	total := 0
	for i := 0; i < n; i++ {
		m := mut(i)
		total += len(m.data)
		if positional && m.vals != nil {
			if sh == nil {
				sh = m.shape
			} else if m.shape != sh && m.shape.Layout != sh.Layout {
				positional = false // two shapes in one batch: the map form says it
			}
		}
	}
	buf := make([]byte, 0, total)
	for i := 0; i < n; i++ {
		buf = append(buf, mut(i).data...)
	}
	all := unsafe.String(unsafe.SliceData(buf), len(buf)) // buf is never written again
	b.Mutations = make([]*apiv1.Mutation, 0, n)
	var rows *contract.Rows
	if positional && sh != nil && sh.Layout != nil {
		rows = &contract.Rows{Layout: sh.Layout, Vals: make([][]*apiv1.Value, 0, n)}
	}
	off := 0
	for i := 0; i < n; i++ {
		m := mut(i)
		k := len(m.data)
		seq := b.FirstSeq + uint64(i)
		if rows != nil {
			pm, vals := a.toRow(m, seq, all[off:off+k], buf[off:off+k:off+k])
			b.Mutations = append(b.Mutations, pm)
			rows.Vals = append(rows.Vals, vals)
		} else {
			b.Mutations = append(b.Mutations, a.toProto(m, seq, all[off:off+k], buf[off:off+k:off+k]))
		}
		off += k
	}
	return rows
}

// assembleRows is assemble with the rows encoded (E96) when positional:
// what a sink that takes rows (the emulator itself) gets.
func (a *protoAlloc) assembleRows(b *apiv1.MutationBatch, n int, mut func(i int) *Mutation, positional bool) *contract.Rows {
	if positional {
		if rows := a.assembleEnc(b, n, mut); rows != nil {
			return rows
		}
	}
	return a.assemble(b, n, mut, false)
}

// uniformLayout is the one layout of the n mutations' upserts, nil when
// there is none or more than one (the map form says it).
func uniformLayout(n int, mut func(i int) *Mutation) *contract.Layout {
	var sh *shape
	for i := 0; i < n; i++ {
		m := mut(i)
		if m.vals == nil {
			continue
		}
		if sh == nil {
			sh = m.shape
		} else if m.shape != sh && m.shape.Layout != sh.Layout {
			return nil
		}
	}
	if sh == nil {
		return nil
	}
	return sh.Layout
}

// assembleEnc is assemble for a sink that takes encoded rows (E96): it
// fills b's mutations without fields maps and returns their rows encoded
// by the emulator's own value encoders (docstore), one exact-size slice
// per upsert that the emulator keeps as the document's row, with no
// Value built on either side. Only the primary keys are copied into one
// immutable string. It returns nil (and fills nothing) unless every
// upsert has one layout.
func (a *protoAlloc) assembleEnc(b *apiv1.MutationBatch, n int, mut func(i int) *Mutation) *contract.Rows {
	layout := uniformLayout(n, mut)
	if layout == nil {
		return nil
	}
	keys := 0
	for i := 0; i < n; i++ {
		m := mut(i)
		keys += len(m.data) - int(m.pkOff)
	}
	kb := make([]byte, 0, keys)
	for i := 0; i < n; i++ {
		kb = append(kb, mut(i).pk()...)
	}
	ks := unsafe.String(unsafe.SliceData(kb), len(kb)) // kb is never written again
	b.Mutations = make([]*apiv1.Mutation, 0, n)
	rows := &contract.Rows{Layout: layout, Enc: make([][]byte, n)}
	off := 0
	for i := 0; i < n; i++ {
		m := mut(i)
		k := len(m.data) - int(m.pkOff)
		pm := take(&a.muts)
		pm.Seq = b.FirstSeq + uint64(i)
		pm.CommitTs = m.CommitTs
		pm.Kind = m.Kind
		pm.PrimaryKey = ks[off : off+k]
		off += k
		b.Mutations = append(b.Mutations, pm)
		if m.Kind != apiv1.MutationKind_MUTATION_KIND_DELETE {
			rows.Enc[i] = encodeRow(m)
		}
	}
	return rows
}

// encodeRow is m's compact row (E45) in its own exact-size slice.
func encodeRow(m *Mutation) []byte {
	size := 0
	for i := range m.vals {
		v := &m.vals[i]
		switch v.kind {
		case vNull:
			size += docstore.SizeNull
		case vInt:
			size += docstore.SizeInt64(int64(v.num))
		case vUint:
			size += docstore.SizeUint64(v.num)
		case vFloat:
			size += docstore.SizeDouble
		default:
			size += docstore.SizeLenPrefixed(int(v.n), v.kind == vVector)
		}
	}
	row := make([]byte, 0, size)
	for i := range m.vals {
		v := &m.vals[i]
		switch v.kind {
		case vNull:
			row = docstore.AppendNull(row)
		case vInt:
			row = docstore.AppendInt64(row, int64(v.num))
		case vUint:
			row = docstore.AppendUint64(row, v.num)
		case vFloat:
			row = docstore.AppendDouble(row, math.Float64frombits(v.num))
		case vString:
			row = docstore.AppendString(row, str(m.data[v.off:v.off+v.n]))
		case vJSON:
			row = docstore.AppendJSON(row, str(m.data[v.off:v.off+v.n]))
		case vBytes:
			row = docstore.AppendBytes(row, m.data[v.off:v.off+v.n])
		case vVector:
			row = docstore.AppendVectorLE(row, m.data[v.off:v.off+v.n])
		}
	}
	return row
}

// str views b as a string for the time of one append.
func str(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
