package minicdc

import (
	"context"
	"testing"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/types"

	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/mounter"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/rowcodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// nopSink accepts everything (the benchmark measures the runtime, not the
// callee).
type nopSink struct{}

func (nopSink) OnRowChanged(context.Context, RowChanged) error { return nil }
func (nopSink) OnDDL(context.Context, DDL) error               { return nil }
func (nopSink) OnCheckpoint(context.Context, Checkpoint) error { return nil }

func benchTable(id int64) *model.TableInfo {
	col := func(cid int64, name string, tp byte, off int) *model.ColumnInfo {
		c := &model.ColumnInfo{ID: cid, Name: model.NewCIStr(name), Offset: off, State: model.StatePublic}
		c.FieldType = *types.NewFieldType(tp)
		return c
	}
	pk := col(1, "id", mysql.TypeLonglong, 0)
	pk.FieldType.AddFlag(mysql.PriKeyFlag | mysql.NotNullFlag)
	title := col(2, "title", mysql.TypeVarchar, 1)
	title.FieldType.SetCharset("utf8mb4")
	return &model.TableInfo{ID: id, Name: model.NewCIStr("bench"), PKIsHandle: true, State: model.StatePublic,
		Columns: []*model.ColumnInfo{pk, title, col(3, "price", mysql.TypeLong, 2), col(4, "stock", mysql.TypeLong, 3)}}
}

// benchRuntime starts a runtime over one table whose store is always
// ready, with the given decoder, and returns the table's consumer.
func benchRuntime(b *testing.B, dec func() RowDecoder, ti *model.TableInfo) (*Runtime, kvevent.Consumer) {
	h := newHarness()
	h.store.setResolved(1 << 62)
	h.store.mu.Lock()
	h.store.versions[ti.ID] = []tableVersion{{ts: 0, ti: ti}}
	h.store.mu.Unlock()
	h.deps.NewDecoder = func(int64) (RowDecoder, error) { return dec(), nil }
	rt, err := Start(context.Background(), StartConfig{TableIDs: []int64{ti.ID}, StartTs: 10, DDLPollLimit: 8}, h.deps, nopSink{}, h.opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rt.Close() })
	return rt, h.src.consumer(ti.ID)
}

// benchBatches builds batches of inserts and updates (4-column rows in row
// format v2) with increasing commit ts.
func benchBatches(b *testing.B, tableID int64, batches, perBatch int) [][]kvevent.RawKVEntry {
	out := make([][]kvevent.RawKVEntry, batches)
	commit := uint64(100)
	for i := range out {
		for j := 0; j < perBatch; j++ {
			commit++
			val, err := rowcodec.EncodeV2(nil, []int64{2, 3, 4}, []value.Datum{
				value.NewStringDatum("a product title of some length"), value.NewIntDatum(int64(j)), value.NewIntDatum(7)}, nil)
			if err != nil {
				b.Fatal(err)
			}
			e := kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: tablecodec.EncodeIntRecordKey(nil, tableID, int64(j)), Value: val, StartTs: commit - 1, CRTs: commit}
			if j%2 == 1 {
				e.OldValue = val
			}
			out[i] = append(out[i], e)
		}
	}
	return out
}

func runConsumeBench(b *testing.B, dec func() RowDecoder) {
	ti := benchTable(42)
	_, c := benchRuntime(b, dec, ti)
	const perBatch = 256
	// One batch, re-stamped with higher commit ts each round (the runtime
	// must see commit ts above its resolved ts), so the heap stays small.
	batch := benchBatches(b, ti.ID, 1, perBatch)[0]
	b.ReportAllocs()
	b.ResetTimer()
	rows := 0
	commit := uint64(100)
	for rows < b.N {
		for j := range batch {
			commit++
			batch[j].StartTs, batch[j].CRTs = commit-1, commit
		}
		c.ConsumeKV(batch)
		c.AdvanceResolvedTs(commit)
		rows += perBatch
	}
	b.StopTimer()
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkConsumeKV_RuntimeOnly measures the runtime's own per-row cost
// (start-boundary and ordering checks, schema gate, lookup, callback,
// resolved ts) with a decoder that only classifies.
func BenchmarkConsumeKV_RuntimeOnly(b *testing.B) {
	runConsumeBench(b, func() RowDecoder { return fakeDecoder{} })
}

// BenchmarkConsumeKV_Mounter is the same with the real mounter decoding
// 4-column v2 rows (lazily: the nop callee reads no column).
func BenchmarkConsumeKV_Mounter(b *testing.B) {
	runConsumeBench(b, func() RowDecoder { return mounter.New(mounter.Config{RequireOldValue: true}) })
}
