package tablecodec

import (
	"encoding/hex"
	"testing"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value/golden"
)

// benchKeys returns the record keys of reference/bench-rows.jsonl (the rows
// perf-anchors.md measures TiDB on).
func benchKeys(b *testing.B) (raw, cmp []byte, tableID, handle int64) {
	b.Helper()
	recs := golden.OfKind(b, "reference/bench-rows.jsonl", "bench_row")
	var g struct {
		KeyHex  string `json:"key_hex"`
		CmpHex  string `json:"comparable_key_hex"`
		TableID int64  `json:"table_id"`
		Handle  int64  `json:"handle"`
	}
	recs[0].Decode(b, &g)
	raw, _ = hex.DecodeString(g.KeyHex)
	cmp, _ = hex.DecodeString(g.CmpHex)
	return raw, cmp, g.TableID, g.Handle
}

// TiDB tablecodec.DecodeRecordKey on the same key: 17 ns, 1 alloc.
func BenchmarkDecodeRecordKey(b *testing.B) {
	raw, _, tid, h := benchKeys(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t, hd, err := DecodeRecordKey(raw)
		if err != nil || t != tid || hd.IntValue() != h {
			b.Fatal("bad decode")
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "keys/s")
}

// Common handle keys return a borrowed sub-slice after validating it.
func BenchmarkDecodeRecordKeyCommonHandle(b *testing.B) {
	key, _ := hex.DecodeString("7480000000000000645f7201e4b8ade69687c3a9ff0000000000000000f7037fffffffffffffff")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, h, err := DecodeRecordKey(key); err != nil || h.IsInt() {
			b.Fatal("bad decode")
		}
	}
}

// TiDB codec.DecodeBytes of the 27-byte comparable key into a caller's
// buffer: 13 ns, 0 allocs.
func BenchmarkDecodeComparableKey(b *testing.B) {
	raw, cmp, _, _ := benchKeys(b)
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, out, err := codec.DecodeBytes(cmp, buf)
		if err != nil || len(out) != len(raw) {
			b.Fatal("bad decode")
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "keys/s")
}

func BenchmarkEncodeComparableKey(b *testing.B) {
	raw, _, _, _ := benchKeys(b)
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		buf = codec.EncodeBytes(buf[:0], raw)
	}
}

func BenchmarkEncodeIntRecordKey(b *testing.B) {
	buf := make([]byte, 0, 32)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		buf = EncodeIntRecordKey(buf[:0], 42, int64(i))
	}
}
