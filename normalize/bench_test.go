package normalize

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/pingcap/tidb/pkg/parser/mysql"

	"github.com/searchfabric/sfemu/emulator"
	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/internal/cputime"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/reorder"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// nopSink acknowledges everything without storing it, so the benchmark
// measures the bridge alone.
type nopSink struct{}

func (nopSink) PutCollectionSchema(_ context.Context, r *apiv1.PutCollectionSchemaRequest) (*apiv1.PutCollectionSchemaResponse, error) {
	return &apiv1.PutCollectionSchemaResponse{Lineage: &apiv1.Lineage{SchemaVersion: r.GetSchemaVersion(), SchemaGenerationToken: "g1"}}, nil
}
func (nopSink) Ingest(_ context.Context, b *apiv1.MutationBatch) (*apiv1.IngestResponse, error) {
	return &apiv1.IngestResponse{LastSeq: b.GetFirstSeq() + uint64(len(b.GetMutations())) - 1}, nil
}
func (nopSink) AdvancePartition(context.Context, *apiv1.PartitionProgress) (*apiv1.AdvancePartitionResponse, error) {
	return &apiv1.AdvancePartitionResponse{}, nil
}
func (nopSink) GetProgress(context.Context, *apiv1.GetProgressRequest) (*apiv1.GetProgressResponse, error) {
	return &apiv1.GetProgressResponse{}, nil
}
func (nopSink) ListCollections(context.Context, *apiv1.ListCollectionsRequest) (*apiv1.ListCollectionsResponse, error) {
	return &apiv1.ListCollectionsResponse{}, nil
}

// tenColumnTable: id BIGINT PK, title VARCHAR(255), body TEXT, tag
// VARCHAR(16), 4 ints, price DOUBLE, qty INT UNSIGNED.
func tenColumnTable() (*model.TableInfo, fakeRow) {
	ti := intPKTable(42, "items",
		colDef{name: "body", tp: mysql.TypeBlob, flen: 65535},
		colDef{name: "tag", tp: mysql.TypeVarchar, flen: 16},
		colDef{name: "a", tp: mysql.TypeLong},
		colDef{name: "b", tp: mysql.TypeLong},
		colDef{name: "c", tp: mysql.TypeLonglong},
		colDef{name: "price", tp: mysql.TypeDouble},
		colDef{name: "qty", tp: mysql.TypeLong, flag: mysql.UnsignedFlag},
	)
	r := fakeRow{
		0: value.NewIntDatum(1), 1: value.NewStringDatum("a reasonably short product title"),
		2: value.NewStringDatum("a body text of a few dozen bytes, as a description would be"),
		3: value.NewIntDatum(7), 4: value.NewStringDatum("blue"), 5: value.NewIntDatum(11), 6: value.NewIntDatum(12),
		7: value.NewIntDatum(13), 8: value.NewFloat64Datum(9.99), 9: value.NewUintDatum(3),
	}
	// Column 2 (n) is INT; 3 is body... keep the row aligned with the table.
	r[2], r[3] = value.NewIntDatum(5), value.NewStringDatum("a body text of a few dozen bytes, as a description would be")
	return ti, r
}

// sliceRow is a ColumnSource without map lookups, so the benchmark does
// not measure the test double.
type sliceRow []value.Datum

func (r sliceRow) Column(offset int, _ *minicdc.ColumnInfo) (minicdc.Value, error) {
	return minicdc.Value(r[offset]), nil
}

// Values makes sliceRow a BulkColumnSource like runtime rows.
func (r sliceRow) Values(dst []minicdc.Value) ([]minicdc.Value, error) {
	return append(dst[:0], minicdc.ValuesOf(r)...), nil
}

func newBenchBridge(b *testing.B) (*Bridge, *minicdc.TableInfo, sliceRow) {
	mti, fr := tenColumnTable()
	ti := mt(mti)
	r := make(sliceRow, len(fr))
	for k, v := range fr {
		r[k] = v
	}
	br, err := New(Config{ClientID: "bench", StartTs: 1, Tables: []Table{{PhysicalID: 42, Database: "shop", Info: ti}}}, nopSink{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := br.Open(context.Background()); err != nil {
		b.Fatal(err)
	}
	return br, ti, r
}

// BenchmarkBridgeRowCore is the per-row bridge overhead the issue bounds:
// copy into an owned mutation + reorder add/seal/drain + seq assignment +
// batch cutting, without building protobuf messages.
func BenchmarkBridgeRowCore(b *testing.B) {
	br, ti, r := newBenchBridge(b)
	p, _ := br.partByID(42)
	ctx := context.Background()
	var src ColumnSource = r
	var drained []reorder.Item[Mutation]
	var cuts []int
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	ts := uint64(10)
	for i := 0; i < b.N; i++ {
		ts++
		r[0] = value.NewIntDatum(int64(i))
		if err := br.AddRow(ctx, RowInput{TableID: 42, CommitTs: ts, RowType: minicdc.RowTypeInsert, Post: src, TableInfo: ti}); err != nil {
			b.Fatal(err)
		}
		if i%256 == 255 {
			var err error
			drained, err = p.buf.SealCheckpoint(ts, drained[:0])
			if err != nil {
				b.Fatal(err)
			}
			p.seq.assign(len(drained))
			cuts = cutPoints(len(drained), DefaultMaxBatchRows, DefaultMaxBatchBytes, func(i int) int64 { return drained[i].Value.wireSize() }, func(int) string { return "g" }, cuts)
			for j := range drained {
				drained[j].Value.release()
			}
			clear(drained)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/row")
}

// BenchmarkBridgeRowFull adds building the MutationBatch protobufs and the
// Ingest/AdvancePartition calls (to a no-op sink) through Checkpoint.
func BenchmarkBridgeRowFull(b *testing.B) {
	br, ti, r := newBenchBridge(b)
	ctx := context.Background()
	var src ColumnSource = r
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	ts := uint64(10)
	for i := 0; i < b.N; i++ {
		ts++
		r[0] = value.NewIntDatum(int64(i))
		if err := br.AddRow(ctx, RowInput{TableID: 42, CommitTs: ts, RowType: minicdc.RowTypeInsert, Post: src, TableInfo: ti}); err != nil {
			b.Fatal(err)
		}
		if i%256 == 255 {
			if err := br.Checkpoint(ctx, map[int64]uint64{42: ts}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/row")
}

// cpuTime is the process's user+system CPU time in ns. On a shared, loaded
// machine wall time per op is inflated by waiting for a core; CPU time per
// row is the cost the bridge itself adds (including GC work).
func cpuTime() int64 { return int64(cputime.Process()) }

// BenchmarkBridgeBacklogEmulator drains a backlog of b.N rows (the shape
// of the end-to-end catch-up table: id BIGINT PK, title VARCHAR(100),
// price INT, stock INT; title as KEYWORD so the text index does not
// compete) at one checkpoint into the real emulator, which commits and
// fsyncs each batch: the bridge's control path as the catch-up runs it.
// Only the checkpoint is timed.
func BenchmarkBridgeBacklogEmulator(b *testing.B) {
	for _, rows := range []int{1024, DefaultMaxBatchRows} {
		b.Run(fmt.Sprintf("batch=%d", rows), func(b *testing.B) {
			emu, err := emulator.Open(filepath.Join(b.TempDir(), "emu"), emulator.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer emu.Close()
			mti := intPKTable(42, "items", colDef{name: "stock", tp: mysql.TypeLong})
			mti.Columns[1].FieldType.SetFlen(100)
			ti := mt(mti)
			br, err := New(Config{ClientID: "bench", StartTs: 1, MaxBatchRows: rows, MaxUnsealedRows: b.N + 1, MaxUnsealedBytes: 1 << 40,
				Tables: []Table{{PhysicalID: 42, Database: "shop", Info: ti}},
				Roles:  map[string]RoleOverrides{"shop.items": {"title": apiv1.FieldRole_FIELD_ROLE_KEYWORD}}}, emu)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			if _, err := br.Open(ctx); err != nil {
				b.Fatal(err)
			}
			r := sliceRow{value.NewIntDatum(0), value.NewStringDatum(""), value.NewIntDatum(0), value.NewIntDatum(0)}
			var src ColumnSource = r
			var title []byte
			for i := 0; i < b.N; i++ {
				title = fmt.Appendf(title[:0], "item number %d", i)
				r[0], r[1], r[2], r[3] = value.NewIntDatum(int64(i)), value.NewStringDatum(string(title)), value.NewIntDatum(int64(i%1000)), value.NewIntDatum(int64(i%50))
				if err := br.AddRow(ctx, RowInput{TableID: 42, CommitTs: uint64(10 + i/512), RowType: minicdc.RowTypeInsert, Post: src, TableInfo: ti}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			if err := br.Checkpoint(ctx, map[int64]uint64{42: uint64(11 + b.N/512)}); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/row")
		})
	}
}
