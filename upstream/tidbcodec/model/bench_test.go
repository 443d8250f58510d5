package model

import "testing"

// BenchmarkColumnByID is the mounter's per-cell column lookup.
func BenchmarkColumnByID(b *testing.B) {
	recs := goldenRecords(b, "tidb-golden.jsonl", "model_table_info")
	ti, err := ParseTableInfo(recs[0]["json"])
	if err != nil {
		b.Fatal(err)
	}
	n := int64(len(ti.Columns))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if ti.ColumnByID(1+int64(i)%n) == nil {
			b.Fatal("missing column")
		}
	}
}

// BenchmarkParseJob parses a real finished job with its table info.
func BenchmarkParseJob(b *testing.B) {
	recs := goldenRecords(b, "tidb-golden.jsonl", "model_job")
	data := []byte(recs[1]["history_json"])
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for i := 0; i < b.N; i++ {
		if _, err := ParseJob(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCloneTableInfo is the store's per-DDL private copy.
func BenchmarkCloneTableInfo(b *testing.B) {
	recs := goldenRecords(b, "tidb-golden.jsonl", "model_table_info")
	ti, err := ParseTableInfo(recs[0]["json"])
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = ti.Clone()
	}
}
