package normalize

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/pingcap/tidb/pkg/parser/mysql"

	"github.com/searchfabric/sfemu/emulator"
	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// BenchmarkHotpathSnapshotIngest is the shared hot path of issue 17's
// snapshot without the upstream's scan: b.N rows of the 10-column
// snapshot benchmark table (adapter BenchmarkSN_Snapshot: ints, short
// strings, a double; no TEXT field, metadata_aux off) lowered by a
// SnapshotPartition and ingested into an emulator on disk, in chunks of
// 1024 rows (what one scan chunk hands over), one fsynced commit per
// batch. The rows' datums are built before the timer. Reports process
// CPU per row (getrusage), which a loaded machine distorts less than
// rows/s, and allocs/op (per row).
func BenchmarkHotpathSnapshotIngest(b *testing.B) {
	emu, err := emulator.Open(filepath.Join(b.TempDir(), "emu"), emulator.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer emu.Close()
	mti := intPKTable(42, "wide",
		colDef{name: "c", tp: mysql.TypeLonglong},
		colDef{name: "d", tp: mysql.TypeVarchar, flen: 32},
		colDef{name: "e", tp: mysql.TypeVarchar, flen: 32},
		colDef{name: "f", tp: mysql.TypeDouble},
		colDef{name: "g", tp: mysql.TypeLong},
		colDef{name: "h", tp: mysql.TypeVarchar, flen: 16},
		colDef{name: "i", tp: mysql.TypeLonglong},
	)
	mti.Columns[1].FieldType.SetFlen(32)
	ti := mt(mti)
	const s = 1000
	br, err := New(Config{ClientID: "bench", StartTs: s, DisableMetadataAux: true,
		Tables: []Table{{PhysicalID: 42, Database: "bench", Info: ti}}}, emu)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	res, err := br.Open(ctx)
	if err != nil {
		b.Fatal(err)
	}
	st, err := emu.GetCollection(ctx, &apiv1.GetCollectionRequest{Name: "bench.wide"})
	if err != nil {
		b.Fatal(err)
	}
	p, err := NewSnapshotPartition(emu, SnapshotConfig{Partition: PartitionName(0, 42), Collection: "bench.wide", Epoch: res.Epoch,
		Token: st.GetLineage().GetSchemaGenerationToken(), Ts: s, Table: ti, PhysicalID: 42})
	if err != nil {
		b.Fatal(err)
	}
	rows := make([]SnapshotRow, b.N)
	for i := range rows {
		id := int64(i)
		rows[i] = SnapshotRow{Key: tablecodec.EncodeIntRecordKey(nil, 42, id), Values: minicdc.ValuesOf([]value.Datum{
			value.NewIntDatum(id), value.NewStringDatum(fmt.Sprintf("name-%d", id)), value.NewIntDatum(id % 7), value.NewIntDatum(id * 3),
			value.NewStringDatum("category"), value.NewStringDatum("x"), value.NewFloat64Datum(float64(id) / 3), value.NewIntDatum(id % 100),
			value.NewStringDatum("tag"), value.NewIntDatum(-id)})}
	}
	const chunk = 1024
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for start := 0; start < b.N; start += chunk {
		part := rows[start:min(start+chunk, b.N)]
		ch, err := p.Lower(len(part), func(i int) (SnapshotRow, error) { return part[i], nil })
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Ingest(ctx, ch); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/1e3/float64(b.N), "cpu-µs/row")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
