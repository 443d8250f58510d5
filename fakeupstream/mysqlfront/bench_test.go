package mysqlfront

import (
	"fmt"
	"testing"
)

// BenchmarkSelectRows: a 1000-row SELECT through go-sql-driver (rows/s is
// the figure to watch; the read is a full ReadTable at a fresh ts).
func BenchmarkSelectRows(b *testing.B) {
	f := startFront(b)
	mustExec(b, f.db, "CREATE DATABASE bs")
	mustExec(b, f.db, "CREATE TABLE bs.t (id BIGINT PRIMARY KEY, v VARCHAR(64), d DECIMAL(10,2))")
	for i := 0; i < 1000; i += 100 {
		q := "INSERT INTO bs.t VALUES "
		for j := i; j < i+100; j++ {
			if j > i {
				q += ","
			}
			q += fmt.Sprintf("(%d, 'value-%d', %d.25)", j, j, j)
		}
		mustExec(b, f.db, q)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rows := queryStrings(b, f.db, "SELECT id, v, d FROM bs.t WHERE id >= 0 ORDER BY id")
		if len(rows) != 1000 {
			b.Fatalf("%d rows", len(rows))
		}
	}
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkInsert: one auto-committed single-row INSERT per op over the
// wire (client interpolation, parse, sqlfront write, commit).
func BenchmarkInsert(b *testing.B) {
	f := startFront(b)
	mustExec(b, f.db, "CREATE DATABASE bi")
	mustExec(b, f.db, "CREATE TABLE bi.t (id BIGINT PRIMARY KEY, v VARCHAR(64))")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		mustExec(b, f.db, "INSERT INTO bi.t VALUES (?, ?)", i, "v")
	}
}
