package schemastore

import (
	"testing"

	"github.com/searchfabric/sfemu/upstream/kvevent"
)

// FuzzJobRowDecode: the DDL job row decoder returns errors, never panics,
// on any key and value bytes (seeded with real tidb_ddl_history rows).
func FuzzJobRowDecode(f *testing.F) {
	for _, r := range goldenRecords(f, "tidb-server-capture.jsonl", "server_ddl_history") {
		f.Add(r.hex(f, "row_key_hex"), r.hex(f, "row_value_hex"))
	}
	f.Add([]byte("t"), []byte{0x80})
	hist := serverTable(f, "mysql.tidb_ddl_history")
	f.Fuzz(func(t *testing.T, key, val []byte) {
		dec, err := newJobDecoder(hist)
		if err != nil {
			t.Fatal(err)
		}
		j, err := dec.decode(&kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: key, Value: val, CRTs: 5})
		if err == nil && j == nil {
			t.Fatal("nil job without error")
		}
	})
}
