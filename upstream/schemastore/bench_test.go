package schemastore

import (
	"context"
	"fmt"
	"testing"

	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
)

// BenchmarkGetTableInfo is the mounter's hot path: the schema of a table at
// a recent ts (the version list is short and the lookup lock-light).
func BenchmarkGetTableInfo(b *testing.B) {
	e := baseEnv(b)
	for i := 1; i <= 5; i++ {
		e.apply(uint64(1000+100*i), withTable(job(int64(i), model.ActionAddColumn, 10, 20, int64(i+1)), tbl(20, "t", 2+i)))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ti, err := e.store.GetTableInfo(20, 1450)
		if err != nil || ti == nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGetTableInfoLongHistory looks up a table with 200 versions
// (binary search path).
func BenchmarkGetTableInfoLongHistory(b *testing.B) {
	e := baseEnv(b)
	for i := 1; i <= 200; i++ {
		e.deliver(uint64(1000+10*i), withTable(job(int64(i), model.ActionAddColumn, 10, 20, int64(i+1)), tbl(20, "t", 2+i%5)))
	}
	e.resolve(3000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := e.store.GetTableInfo(20, uint64(1005+10*(i%200))); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGetTableInfoParallel measures the same lookup from all cores.
func BenchmarkGetTableInfoParallel(b *testing.B) {
	e := baseEnv(b)
	e.apply(1100, withTable(job(1, model.ActionAddColumn, 10, 20, 2), tbl(20, "t", 3)))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := e.store.GetTableInfo(20, 1100); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkApply10kDDLJobs decodes, orders, applies and persists 10,000
// DDL jobs (1,000 tables created, 9,000 columns added) delivered as
// tidb_ddl_job rows, resolving every 100 jobs (one fsync'd write each).
func BenchmarkApply10kDDLJobs(b *testing.B) {
	const n = 10000
	jt := serverTable(b, "mysql.tidb_ddl_job")
	entries := make([]kvevent.RawKVEntry, n)
	cols := map[int64]int{}
	for i := 0; i < n; i++ {
		var j *model.Job
		ts := uint64(2000 + i)
		if i < 1000 {
			id := int64(10000 + i)
			cols[id] = 1
			j = withTable(job(int64(i+1), model.ActionCreateTable, 10, id, int64(i+2)), tbl(id, fmt.Sprintf("t%d", i), 1))
		} else {
			id := int64(10000 + i%1000)
			cols[id]++
			j = withTable(job(int64(i+1), model.ActionAddColumn, 10, id, int64(i+2)), tbl(id, fmt.Sprintf("t%d", i%1000), cols[id]))
		}
		k, v := jobRow(b, jt, j)
		entries[i] = kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: k, Value: v, CRTs: ts, StartTs: ts - 1}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		b.StopTimer()
		e := baseEnv(b)
		b.StartTimer()
		for i := 0; i < n; i += 100 {
			e.consumer.ConsumeKV(entries[i : i+100])
			e.consumer.AdvanceResolvedTs(entries[i+99].CRTs)
		}
		b.StopTimer()
		if err := e.store.Err(); err != nil {
			b.Fatal(err)
		}
		if evs := e.events(snapTs); len(evs) != n {
			b.Fatalf("%d events", len(evs))
		}
		e.closeStore()
		b.StartTimer()
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkOpenStore10kTables reopens a persisted store holding 10,000
// tables (verification of every record included).
func BenchmarkOpenStore10kTables(b *testing.B) {
	e := newEnv(b, func(f *fakeSnapshot) {
		f.addDB(b, nil, dbInfo(10, "db"))
		for i := 0; i < 10000; i++ {
			f.addTable(b, nil, 10, tbl(int64(100000+i), fmt.Sprintf("t%d", i), 4))
		}
	})
	e.closeStore()
	cfg := e.cfg
	cfg.Snapshot = nil
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.RegisterKeyspace(context.Background(), 0); err != nil {
			b.Fatal(err)
		}
		if _, err := s.GetTableInfo(100000+9999, snapTs); err != nil {
			b.Fatal(err)
		}
		_ = s.Close()
	}
}
