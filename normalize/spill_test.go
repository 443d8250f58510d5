// Tests for transactions of any size within a memory quota (specs/minicdc.md
// RS1-RS4, specs/normalization.md N40).
package normalize

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/stretchr/testify/require"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/memquota"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/spill"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
)

func spillConfig(t *testing.T, quota int64) (SpillConfig, string) {
	t.Helper()
	mem, err := memquota.New("memory-quota", quota)
	require.NoError(t, err)
	dir := t.TempDir()
	d, err := spill.OpenDir(dir)
	require.NoError(t, err)
	return SpillConfig{Memory: mem, Dir: d, Hint: "raise --spill-quota"}, dir
}

func twoTables() []Table {
	return []Table{
		{PhysicalID: 42, SchemaID: 2, Database: "shop", Info: mt(intPKTable(42, "items"))},
		{PhysicalID: 43, SchemaID: 2, Database: "shop", Info: mt(intPKTable(43, "orders"))},
	}
}

// TestRS3_BigTransactionSpillsAndIngestsInBatches (RS2, RS3, RS4, N40): a
// 20,000-row transaction with a 256 KiB quota spills, interleaved with
// small transactions of both tables; a DDL at the big transaction's
// commit ts seals it. Every row of the transaction reaches the sink once,
// in arrival order, in batches of at most MaxBatchRows with contiguous
// seqs and its commit ts, all before the schema request; the runs are
// removed once acknowledged and the quota is returned.
func TestRS3_BigTransactionSpillsAndIngestsInBatches(t *testing.T) {
	sc, dir := spillConfig(t, 256<<10)
	h := newHarness(t, newFakeSink(), Config{Tables: twoTables(), MaxBatchRows: 1000, Spill: sc})
	const big = 20_000
	h.upsert(42, 199, row(1_000_000, "before", 1))
	h.upsert(43, 150, row(1, "small", 1))
	for i := 0; i < big; i++ {
		h.upsert(42, 200, row(int64(i), fmt.Sprintf("row-%06d-%s", i, strings.Repeat("x", 30)), int64(i)))
		if i%5000 == 0 {
			h.upsert(43, 200+uint64(i/5000), row(int64(10+i), "interleaved", 2))
		}
	}
	h.upsert(42, 201, row(2_000_000, "after", 3))
	var st PartitionStats
	for _, s := range h.b.Stats() {
		if s.Partition == "table:42" {
			st = s
		}
	}
	require.Greater(t, st.SpillFiles, 0, "the transaction spilled")
	require.Greater(t, st.SpilledRows, big/2)
	require.LessOrEqual(t, sc.Memory.Used(), int64(256<<10))

	ev, _ := addColumnDDL(h.ti[42], 7, 200, 2, "extra", mysql.TypeLong)
	h.ddl(ev)

	muts := h.sink.mutationsOf("table:42")
	require.Len(t, muts, big+1, "the rows at or below the DDL, once each")
	require.Equal(t, "1000000", muts[0].GetPrimaryKey())
	for i, m := range muts {
		require.Equal(t, uint64(i+1), m.GetSeq(), "contiguous seqs")
		if i > 0 {
			require.Equal(t, uint64(200), m.GetCommitTs())
			require.Equal(t, fmt.Sprint(i-1), m.GetPrimaryKey(), "arrival order within the transaction (N8)")
		}
	}
	lastIngest, put := -1, -1
	for i, c := range h.sink.calls {
		switch {
		case c == "ingest:table:42":
			lastIngest = i
		case strings.HasPrefix(c, "put:") && put < 0 && i > 2:
			put = i
		}
	}
	require.Less(t, lastIngest, put, "every row at the DDL's ts before its schema request (N11, RS3)")
	for _, b := range h.sink.batches {
		require.LessOrEqual(t, len(b.GetMutations()), 1000, "batches bounded by MaxBatchRows (N21, N40)")
	}
	for _, s := range h.b.Stats() {
		if s.Partition == "table:42" {
			require.Zero(t, s.SpillFiles, "drained runs removed after the acknowledgement (RS4)")
			require.Equal(t, 1, s.UnsealedRows+s.SpilledRows, "only the row at 201 is left")
		}
	}
	h.checkpoint(map[int64]uint64{42: 300, 43: 300})
	require.Len(t, h.sink.mutationsOf("table:43"), 5)
	require.Zero(t, sc.Memory.Used(), "the quota is returned")
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, ents)
	require.NoError(t, h.b.Release())
}

// failNthIngest fails the n-th Ingest call (1-based).
type failNthIngest struct {
	*fakeSink
	n, calls int
}

func (f *failNthIngest) Ingest(ctx context.Context, b *apiv1.MutationBatch) (*apiv1.IngestResponse, error) {
	f.calls++
	if f.calls == f.n {
		return nil, fmt.Errorf("injected crash before batch %d", f.n)
	}
	return f.fakeSink.Ingest(ctx, b)
}

// TestN40_CrashBetweenBatchesOfOneTransaction: the bridge stops after the
// second of a spilled transaction's batches; progress was not advanced,
// so the restart (next epoch) gets the whole transaction again from the
// upstream and the collection ends with every row once - no gap, no
// duplicate - with contiguous seqs in the new epoch.
func TestN40_CrashBetweenBatchesOfOneTransaction(t *testing.T) {
	sink := newFakeSink()
	tables := []Table{{PhysicalID: 42, SchemaID: 2, Database: "shop", Info: mt(intPKTable(42, "items"))}}
	const rows = 5000
	load := func(h *harness) {
		for i := 0; i < rows; i++ {
			h.upsert(42, 200, row(int64(i), fmt.Sprintf("v-%d", i), int64(i)))
		}
	}
	sc, _ := spillConfig(t, 64<<10)
	crashing := &failNthIngest{fakeSink: sink, n: 3}
	b, err := New(Config{ClientID: "a", StartTs: 100, Tables: tables, MaxBatchRows: 1000, Spill: sc}, crashing)
	require.NoError(t, err)
	_, err = b.Open(context.Background())
	require.NoError(t, err)
	h := &harness{t: t, sink: sink, b: b, ti: map[int64]*model.TableInfo{42: modelOf(tables[0].Info)}, ctx: context.Background()}
	load(h)
	err = b.Checkpoint(context.Background(), map[int64]uint64{42: 250})
	require.ErrorContains(t, err, "injected crash before batch 3")
	require.Len(t, sink.mutationsOf("table:42"), 2000, "two batches landed")
	require.Empty(t, sink.advs, "no progress past the transaction")
	require.NoError(t, b.Release())
	require.Zero(t, sc.Memory.Used())

	sc2, _ := spillConfig(t, 64<<10)
	h2 := newHarness(t, sink, Config{Tables: tables, MaxBatchRows: 1000, Spill: sc2})
	load(h2) // redelivered from the resume point (N31)
	h2.checkpoint(map[int64]uint64{42: 250})
	docs := sink.liveDocs("shop.items")
	require.Len(t, docs, rows, "every row once")
	var epoch2 []*apiv1.Mutation
	for _, b := range sink.batches {
		if b.GetSourceEpoch() == 2 {
			epoch2 = append(epoch2, b.GetMutations()...)
		}
	}
	require.Len(t, epoch2, rows)
	for i, m := range epoch2 {
		require.Equal(t, uint64(i+1), m.GetSeq())
	}
	require.Equal(t, uint64(250), sink.advs[len(sink.advs)-1].GetResolvedTs())
}

// TestRS1_HeldBytesMatchTheHeap measures what a held row really costs: it
// buffers 100k rows of a 3-column table (a ~60-byte row: id, a 40-byte
// title, n) and compares the bytes charged to the quota with the heap
// they take. The charge is the row's owned bytes plus its slot in the
// reorder chunk; it must be within 15% of the measured heap per row.
func TestRS1_HeldBytesMatchTheHeap(t *testing.T) {
	mem, err := memquota.New("memory-quota", 1<<30)
	require.NoError(t, err)
	h := newHarness(t, newFakeSink(), Config{Tables: []Table{{PhysicalID: 42, SchemaID: 2, Database: "shop", Info: mt(intPKTable(42, "items"))}},
		Spill: SpillConfig{Memory: mem}})
	title := strings.Repeat("t", 40)
	const n = 100_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ti := mt(h.ti[42]) // one converted definition (h.upsert converts per row)
	for i := 0; i < n; i++ {
		require.NoError(t, h.b.AddRow(h.ctx, RowInput{TableID: 42, CommitTs: 200, RowType: minicdc.RowTypeInsert, Post: row(int64(i), title, int64(i)), TableInfo: ti}))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := float64(after.HeapAlloc-before.HeapAlloc) / n
	charged := float64(mem.Used()) / n
	t.Logf("per held row: charged %.0f B, heap %.0f B", charged, heap)
	require.InDelta(t, 1, charged/heap, 0.15, "charged %.0f B vs heap %.0f B per row", charged, heap)
	require.NoError(t, h.b.Release())
	require.Zero(t, mem.Used())
}
