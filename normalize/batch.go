package normalize

import (
	"math"
	"unsafe"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
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
// sequenced mutations (N21): a batch ends after maxRows mutations and
// wherever the generation token changes. dst is reused.
func cutPoints(n, maxRows int, genOf func(i int) string, dst []int) []int {
	dst = dst[:0]
	start := 0
	for i := 1; i <= n; i++ {
		if i == n || i-start >= maxRows || genOf(i) != genOf(start) {
			dst = append(dst, i)
			start = i
		}
	}
	return dst
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
	muts    []apiv1.Mutation
}

const protoChunk = 256

func take[T any](s *[]T) *T {
	if len(*s) == cap(*s) {
		*s = make([]T, 0, protoChunk)
	}
	*s = (*s)[:len(*s)+1]
	return &(*s)[len(*s)-1]
}

// toProto builds the wire mutation. all is a copy of m.data (a slice of
// the batch's one immutable copy, see buildBatches), so the proto never
// aliases slab memory.
func (a *protoAlloc) toProto(m *Mutation, seq uint64, all string, allBytes []byte) *apiv1.Mutation {
	pm := take(&a.muts)
	pm.Seq = seq
	pm.CommitTs = m.CommitTs
	pm.Kind = m.Kind
	pm.PrimaryKey = all[m.pkOff:]
	if m.Kind == apiv1.MutationKind_MUTATION_KIND_DELETE {
		return pm
	}
	pm.Fields = make(map[string]*apiv1.Value, len(m.vals))
	for i := range m.vals {
		v := &m.vals[i]
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
			fv := &apiv1.FloatVector{Values: make([]float32, len(b)/4)}
			for j := range fv.Values {
				fv.Values[j] = math.Float32frombits(uint32(b[4*j]) | uint32(b[4*j+1])<<8 | uint32(b[4*j+2])<<16 | uint32(b[4*j+3])<<24)
			}
			w := take(&a.vectors)
			w.VectorValue = fv
			pv.Kind = w
		}
		pm.Fields[m.shape.fields[i].name] = pv
	}
	return pm
}

// buildBatches turns a drained, canonical run of one partition into
// batches (N21): seqs assigned in order from the counter (N6), one token.
func buildBatches(partition, collection, token string, seq *seqCounter, items []reorder.Item[Mutation], maxRows int, cuts []int, alloc *protoAlloc) ([]*apiv1.MutationBatch, []int) {
	if len(items) == 0 {
		return nil, cuts
	}
	cuts = cutPoints(len(items), maxRows, func(int) string { return token }, cuts)
	out := make([]*apiv1.MutationBatch, 0, len(cuts))
	start := 0
	for _, end := range cuts {
		first := seq.assign(end - start)
		b := &apiv1.MutationBatch{
			SourcePartition:       partition,
			SourceEpoch:           seq.epoch,
			FirstSeq:              first,
			SchemaGenerationToken: token,
			Collection:            collection,
			Mutations:             make([]*apiv1.Mutation, 0, end-start),
		}
		// One immutable copy of every byte of the batch: the protos slice it.
		total := 0
		for i := start; i < end; i++ {
			total += len(items[i].Value.data)
		}
		buf := make([]byte, 0, total)
		for i := start; i < end; i++ {
			buf = append(buf, items[i].Value.data...)
		}
		all := unsafe.String(unsafe.SliceData(buf), len(buf)) // buf is never written again
		off := 0
		for i := start; i < end; i++ {
			m := &items[i].Value
			n := len(m.data)
			b.Mutations = append(b.Mutations, alloc.toProto(m, first+uint64(i-start), all[off:off+n], buf[off:off+n:off+n]))
			off += n
		}
		out = append(out, b)
		start = end
	}
	return out, cuts
}
