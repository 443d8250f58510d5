package normalize

import (
	"encoding/binary"
	"math"
	"testing"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
	"github.com/searchfabric/sfemu/emulator/docstore"
)

// TestE96_EncodedRowIsTheValuesEncoding: the encoded rows the bridge
// builds for the emulator (E96) are, byte for byte, the docstore encoding
// of the Values the positional form (E44) carries for the same mutations
// (every value kind normalize produces: null, negative and large ints,
// uints, doubles, strings, JSON, bytes, vectors), with the same mutation
// headers and keys, and nil for a delete.
func TestE96_EncodedRowIsTheValuesEncoding(t *testing.T) {
	sh := &shape{Layout: contract.NewLayout([]string{"n", "i", "u", "f", "s", "j", "b", "v"})}
	mk := func(ts uint64, i int64, u uint64, f float64, s, j, b string, vec []float32, pk string) Mutation {
		var data []byte
		span := func(p []byte) ownedVal {
			v := ownedVal{off: uint32(len(data)), n: uint32(len(p))}
			data = append(data, p...)
			return v
		}
		sv, jv, bv := span([]byte(s)), span([]byte(j)), span([]byte(b))
		sv.kind, jv.kind, bv.kind = vString, vJSON, vBytes
		var le []byte
		for _, x := range vec {
			le = binary.LittleEndian.AppendUint32(le, math.Float32bits(x))
		}
		vv := span(le)
		vv.kind = vVector
		m := Mutation{CommitTs: ts, shape: sh, Kind: apiv1.MutationKind_MUTATION_KIND_UPSERT, vals: []ownedVal{
			{kind: vNull}, {kind: vInt, num: uint64(i)}, {kind: vUint, num: u}, {kind: vFloat, num: math.Float64bits(f)}, sv, jv, bv, vv}}
		m.pkOff = uint32(len(data))
		m.data = append(data, pk...)
		return m
	}
	muts := []Mutation{
		mk(5, -1, 0, 0.5, "", "{}", "", nil, "1"),
		mk(6, math.MinInt64, math.MaxUint64, math.Inf(-1), "héllo", `{"a":[1,2]}`, "\x00\xff", []float32{1, -2.5, float32(math.Inf(1))}, "22"),
		{CommitTs: 7, shape: sh, Kind: apiv1.MutationKind_MUTATION_KIND_DELETE, data: []byte("333")},
		mk(8, 300, 128, math.NaN(), string(make([]byte, 200)), "null", "x", []float32{0}, "4444"),
	}
	mut := func(i int) *Mutation { return &muts[i] }
	var a protoAlloc
	vb := &apiv1.MutationBatch{FirstSeq: 10}
	vrows := a.assemble(vb, len(muts), mut, true)
	eb := &apiv1.MutationBatch{FirstSeq: 10}
	erows := a.assembleEnc(eb, len(muts), mut)
	if vrows == nil || erows == nil || erows.Vals != nil || erows.Layout != vrows.Layout || len(erows.Enc) != len(muts) {
		t.Fatalf("E96: rows %+v, positional %+v", erows, vrows)
	}
	for i := range muts {
		vm, em := vb.GetMutations()[i], eb.GetMutations()[i]
		if vm.GetSeq() != em.GetSeq() || vm.GetCommitTs() != em.GetCommitTs() || vm.GetKind() != em.GetKind() || vm.GetPrimaryKey() != em.GetPrimaryKey() || len(em.GetFields()) != 0 {
			t.Fatalf("E96: mutation %d is %v, positional %v", i, em, vm)
		}
		if vrows.Vals[i] == nil {
			if erows.Enc[i] != nil {
				t.Fatalf("E96: delete %d carries a row % x", i, erows.Enc[i])
			}
			continue
		}
		want, err := docstore.EncodeRow(nil, vrows.Vals[i])
		if err != nil {
			t.Fatal(err)
		}
		if string(erows.Enc[i]) != string(want) || cap(erows.Enc[i]) != len(want) {
			t.Fatalf("E96: row %d is % x (cap %d), the Values encode to % x", i, erows.Enc[i], cap(erows.Enc[i]), want)
		}
	}
	// Two shapes in one batch: no encoded rows (the map form says it).
	other := mk(9, 1, 1, 1, "a", "1", "b", nil, "5")
	other.shape = &shape{Layout: contract.NewLayout([]string{"x"})}
	muts = append(muts, other)
	if r := a.assembleEnc(&apiv1.MutationBatch{}, len(muts), mut); r != nil {
		t.Fatalf("E96: rows of two layouts encoded in one batch: %+v", r)
	}
}
