package sqlfront

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/internal/cputime"
)

// benchTables caches the populated server of the table size in use:
// building a 1M-row table takes seconds, and the testing package calls a
// benchmark function several times while it sizes b.N. Only one size is
// kept, so a 10k-row run does not mark a 1M-row heap left by another
// benchmark.
var (
	benchMu     sync.Mutex
	benchTables = map[int]*Server{}
)

// benchServer returns an in-memory server whose table b.t has rows
// (id BIGINT PRIMARY KEY, email VARCHAR UNIQUE, g10 INT indexed = id/10,
// v INT) for ids 1..rows.
func benchServer(b *testing.B, rows int) *Server {
	b.Helper()
	benchMu.Lock()
	defer benchMu.Unlock()
	if s := benchTables[rows]; s != nil {
		return s
	}
	clear(benchTables)
	runtime.GC()
	c, err := fakeupstream.New(fakeupstream.Config{Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(context.Background(), c)
	if err != nil {
		b.Fatal(err)
	}
	ss := s.NewSession("")
	ctx := context.Background()
	for _, q := range []string{
		"CREATE DATABASE b", "USE b",
		"CREATE TABLE t (id BIGINT PRIMARY KEY, email VARCHAR(32) NOT NULL, g10 INT, v INT, UNIQUE KEY uk_email (email), KEY k_g10 (g10))",
	} {
		if _, err := ss.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	const batch = 1000
	var sb strings.Builder
	for lo := 1; lo <= rows; lo += batch {
		sb.Reset()
		sb.WriteString("INSERT INTO t VALUES ")
		for id := lo; id < lo+batch && id <= rows; id++ {
			if id > lo {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, "(%d,'u%d@x',%d,0)", id, id, id/10)
		}
		if _, err := ss.Exec(ctx, sb.String()); err != nil {
			b.Fatal(err)
		}
	}
	benchTables[rows] = s
	return s
}

var benchSizes = []int{10_000, 100_000, 1_000_000}

// processCPU is the process's user+system CPU time: on a shared, loaded
// machine wall time per op mostly measures waiting for a core, CPU time
// per op ("cpu-ns/op") what the statement costs.
func processCPU() time.Duration { return cputime.Process() }

// measure runs op b.N times and reports cpu-ns/op besides ns/op. The
// garbage of building the table is collected before the timer starts.
func measure(b *testing.B, op func(i int)) {
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		op(i)
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkUpdateByPK (S21): `UPDATE ... WHERE id = ?` is a point get, so
// its cost does not grow with the table (one statement = parse, get,
// encode, 2PC commit in memory).
func BenchmarkUpdateByPK(b *testing.B) {
	benchStatement(b, func(i, id int) string { return fmt.Sprintf("UPDATE t SET v = %d WHERE id = %d", i, id) })
}

// BenchmarkDeleteByPK (S21): `DELETE ... WHERE id = ?`. Only the
// deletes are timed (ns/op, cpu-ns/op): every deleteBatch deletes the
// timer stops and the deleted rows are put back by one INSERT, so the
// table keeps its size within deleteBatch rows during the run.
func BenchmarkDeleteByPK(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			s := benchServer(b, n)
			ss := s.NewSession("b")
			ctx := context.Background()
			batch := min(n/100, 1000)
			var deleted []int
			var cpu time.Duration
			putBack := func() {
				var sb strings.Builder
				sb.WriteString("INSERT INTO t VALUES ")
				for i, id := range deleted {
					if i > 0 {
						sb.WriteByte(',')
					}
					fmt.Fprintf(&sb, "(%d,'u%d@x',%d,0)", id, id, id/10)
				}
				if _, err := ss.Exec(ctx, sb.String()); err != nil {
					b.Fatal(err)
				}
				deleted = deleted[:0]
			}
			runtime.GC()
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			for i := 0; i < b.N; i++ {
				id := 1 + (i*7919)%n
				for slices.Contains(deleted, id) {
					id = 1 + id%n
				}
				if _, err := ss.Exec(ctx, fmt.Sprintf("DELETE FROM t WHERE id = %d", id)); err != nil {
					b.Fatal(err)
				}
				deleted = append(deleted, id)
				if len(deleted) == batch {
					b.StopTimer()
					cpu += processCPU() - cpu0
					putBack()
					b.StartTimer()
					cpu0 = processCPU()
				}
			}
			b.StopTimer()
			cpu += processCPU() - cpu0
			b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
			// The collector's marking while the deletes run is charged
			// to them whatever garbage started it, the re-inserts'
			// included: this figure is an upper bound.
			if len(deleted) > 0 {
				putBack()
			}
		})
	}
}

// BenchmarkUpdateByUniqueIndex (S21): equality on a unique secondary index
// is a point get of the index entry, then of the row.
func BenchmarkUpdateByUniqueIndex(b *testing.B) {
	benchStatement(b, func(i, id int) string { return fmt.Sprintf("UPDATE t SET v = %d WHERE email = 'u%d@x'", i, id) })
}

// BenchmarkUpdateByIndexGroup (S21): `UPDATE ... WHERE g10 = ?` on a
// non-unique index whose groups hold 10 rows at every table size: an
// index prefix scan of 10 entries, 10 point gets and 10 row writes per
// statement, independent of the table size.
func BenchmarkUpdateByIndexGroup(b *testing.B) {
	benchStatement(b, func(i, id int) string { return fmt.Sprintf("UPDATE t SET v = %d WHERE g10 = %d", i, id/10) })
}

// benchStatement runs one statement per op at every table size; stmt
// gets the op index and a row id spread over the table.
func benchStatement(b *testing.B, stmt func(i, id int) string) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			ss := benchServer(b, n).NewSession("b")
			ctx := context.Background()
			measure(b, func(i int) {
				if _, err := ss.Exec(ctx, stmt(i, 1+(i*7919)%n)); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}
