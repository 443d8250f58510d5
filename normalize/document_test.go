package normalize

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// TestRowDocumentEqualsRowPath: RowDocument yields exactly the key and
// fields the row path ingests for the same image (the consistency check
// relies on it).
//
// Rule N38.
func TestRowDocumentEqualsRowPath(t *testing.T) {
	ti := intPKTable(42, "items",
		colDef{name: "f", tp: mysql.TypeFloat},
		colDef{name: "e", tp: mysql.TypeEnum},
		colDef{name: "b", tp: mysql.TypeBit, flag: mysql.UnsignedFlag},
		colDef{name: "v", tp: mysql.TypeTiDBVectorFloat32, flen: 2},
		colDef{name: "raw", tp: mysql.TypeBlob, charset: "binary"},
	)
	vec := make([]byte, 12)
	binary.LittleEndian.PutUint32(vec, 2)
	binary.LittleEndian.PutUint32(vec[4:], math.Float32bits(0.1))
	binary.LittleEndian.PutUint32(vec[8:], math.Float32bits(-2.5))
	img := fakeRow{0: value.NewIntDatum(7), 1: value.NewStringDatum("héllo"), 2: value.NewNullDatum(),
		3: value.NewFloat32Datum(0.1), 4: value.NewEnumDatum(2, "b"), 5: value.NewBitDatum(5, 3),
		6: value.NewVectorFloat32Datum(vec), 7: value.NewBytesDatum([]byte{0, 0xff})}
	datums := make([]value.Datum, len(ti.Columns))
	for off, d := range img {
		datums[off] = d
	}
	sink := newFakeSink()
	h := newHarness(t, sink, Config{Tables: []Table{{PhysicalID: 42, Database: "shop", Info: mt(ti)}}})
	h.upsert(42, 110, img)
	h.checkpoint(map[int64]uint64{42: 120})
	ms := sink.mutationsOf("table:42")
	require.Len(t, ms, 1)

	pk, fields, err := RowDocument(mt(ti), recordKey(42, 7), minicdc.ValuesOf(datums))
	require.NoError(t, err)
	require.Equal(t, ms[0].GetPrimaryKey(), pk)
	require.Equal(t, len(ms[0].GetFields()), len(fields))
	for name, want := range ms[0].GetFields() {
		require.True(t, proto.Equal(want, fields[name]), "field %s: row path %v, RowDocument %v", name, want, fields[name])
	}
	require.InDelta(t, 0.1, fields["f"].GetDoubleValue(), 0, "float32 as its shortest decimal")

	_, _, err = RowDocument(mt(ti), recordKey(42, 7), minicdc.ValuesOf(datums[:3]))
	require.ErrorContains(t, err, "outside the image")
}

// FuzzRowDocument: any image (too short, odd payloads, any row key) yields
// a document or an error, never a panic.
func FuzzRowDocument(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0x80, 0x3f}, []byte("t\x80\x00\x00\x00\x00\x00\x00\x2a_r\x80\x00\x00\x00\x00\x00\x00\x07"), uint8(8), uint8(3))
	f.Add([]byte{}, []byte{}, uint8(0), uint8(0))
	ti := intPKTable(42, "items", colDef{name: "v", tp: mysql.TypeTiDBVectorFloat32, flen: 1}, colDef{name: "j", tp: mysql.TypeJSON})
	noPKModel := intPKTable(43, "nopk")
	noPKModel.PKIsHandle = false
	for _, c := range noPKModel.Columns {
		c.FieldType.SetFlag(0)
	}
	withPK, noPK := mt(ti), mt(noPKModel)
	f.Fuzz(func(t *testing.T, payload, key []byte, n, kind uint8) {
		datums := make([]value.Datum, int(n)%(len(ti.Columns)+2))
		for i := range datums {
			datums[i] = fuzzDatum(kind+uint8(i), uint64(len(payload))*uint64(i+1), payload)
		}
		if len(datums) > 0 {
			datums[0] = value.NewIntDatum(int64(n))
		}
		_, _, _ = RowDocument(withPK, key, minicdc.ValuesOf(datums))
		_, _, _ = RowDocument(noPK, key, minicdc.ValuesOf(datums))
	})
}
