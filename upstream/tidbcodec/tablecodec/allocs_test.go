//go:build !race

// The race detector's instrumentation changes allocation counts, so this
// file is left out of the -race pass.

package tablecodec

import (
	"encoding/hex"
	"testing"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value/golden"
)

// TestK23_ZeroAllocDecodes pins the allocation half of rule K23 on the keys
// of bench-rows.jsonl: record key -> (table id, handle) and comparable key
// -> raw key into a caller buffer allocate nothing (the benchmarks report
// the speed).
func TestK23_ZeroAllocDecodes(t *testing.T) {
	recs := golden.OfKind(t, "reference/bench-rows.jsonl", "bench_row")
	var g struct {
		KeyHex string `json:"key_hex"`
		CmpHex string `json:"comparable_key_hex"`
	}
	recs[0].Decode(t, &g)
	raw, _ := hex.DecodeString(g.KeyHex)
	cmp, _ := hex.DecodeString(g.CmpHex)
	if n := testing.AllocsPerRun(100, func() {
		if _, _, err := DecodeRecordKey(raw); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("DecodeRecordKey: %v allocs per key, want 0", n)
	}
	buf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() {
		if _, out, err := codec.DecodeBytes(cmp, buf); err != nil || len(out) != len(raw) {
			t.Fatal("bad decode", err)
		}
	}); n != 0 {
		t.Errorf("DecodeBytes into a caller buffer: %v allocs per key, want 0", n)
	}
}
