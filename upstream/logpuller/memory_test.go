package logpuller

import (
	"runtime"
	"testing"

	"github.com/pingcap/kvproto/pkg/cdcpb"
	"github.com/stretchr/testify/require"

	"github.com/searchfabric/sfemu/upstream/kvevent"
)

// heapGrowth is the live heap after f minus before it (both after a GC).
func heapGrowth(f func()) int64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.GC()
	runtime.ReadMemStats(&after)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

// nullConsumer drops what the core delivers.
type nullConsumer struct{}

func (nullConsumer) ConsumeKV([]kvevent.RawKVEntry) {}
func (nullConsumer) AdvanceResolvedTs(uint64)       {}

// LP17: what the delivered set is charged is its heap bytes: measured as
// the heap's growth while it holds n rows, within 10 %, at sizes from a
// few chunks to a million-row transaction's share of a region.
func TestLP17_DeliveredSetBytesMatchTheHeap(t *testing.T) {
	for _, n := range []int{5_000, 50_000, 200_000} {
		keys := make([][]byte, n)
		for i := range keys {
			keys[i] = rawKey(1, int64(i))
		}
		var d *deliveredSet
		grew := heapGrowth(func() {
			d = newDeliveredSet()
			for _, k := range keys {
				d.add(1000, 999, k)
			}
		})
		runtime.KeepAlive(keys) // live on both sides of the measure
		ratio := float64(d.bytes) / float64(grew)
		t.Logf("%d rows: charged %d B (%.1f B/row), heap grew %d B; charged/heap %.3f", n, d.bytes, float64(d.bytes)/float64(n), grew, ratio)
		require.InDelta(t, 1, ratio, 0.10, "%d rows: charged %d, heap grew %d", n, d.bytes, grew)
		runtime.KeepAlive(d)
	}
}

// LP13/LP17: what the matcher is charged for held prewrites is their heap
// bytes (the table's index and entry chunks, the copied keys and values),
// within 15 %: measured as the heap's growth while a region holds n
// prewrites.
func TestLP17_MatcherChargeMatchesTheHeap(t *testing.T) {
	for _, n := range []int{5_000, 20_000, 50_000, 100_000, 200_000} {
		mem := mustQuota(t, "memory-quota", 1<<40)
		p, err := NewSpanPuller(Config{Span: tableSpan(1), StartTs: 10, Consumer: nullConsumer{}, MatcherQuota: 1 << 40,
			Matcher: MatcherMemory{Memory: mem}})
		require.NoError(t, err)
		_, err = p.AddRegion(1, 100, tableSpan(1))
		require.NoError(t, err)
		rows := make([]*cdcpb.Event_Row, 256)
		val := []byte("a value of thirty bytes.......")
		grew := heapGrowth(func() {
			for i := 0; i < n; i += len(rows) {
				rows = rows[:min(len(rows), n-i)]
				for j := range rows {
					rows[j] = &cdcpb.Event_Row{Type: cdcpb.Event_PREWRITE, OpType: cdcpb.Event_Row_PUT, StartTs: 20, Key: rawKey(1, int64(i+j)), Value: val}
				}
				_, err := p.HandleEvent(&cdcpb.Event{RegionId: 1, RequestId: 100, Event: &cdcpb.Event_Entries_{Entries: &cdcpb.Event_Entries{Entries: rows}}})
				require.NoError(t, err)
			}
			clear(rows)
		})
		charged := int64(p.MatcherBytes())
		ratio := float64(charged) / float64(grew)
		t.Logf("%d prewrites: charged %d B (%.1f B/prewrite), heap grew %d B (%.1f B/prewrite); charged/heap %.3f", n, charged, float64(charged)/float64(n), grew, float64(grew)/float64(n), ratio)
		require.InDelta(t, 1, ratio, 0.15, "%d prewrites: charged %d, heap grew %d", n, charged, grew)
		runtime.KeepAlive(p)
	}
}

// LP18: a spilled run's index is charged to the memory quota and may take
// its reserve: with the rest of the quota held by others, prewrites go to
// a tail run whose filter is charged from the reserve; the quota is never
// passed, and Release gives the charge back.
func TestLP18_RunIndexChargedToTheReserve(t *testing.T) {
	const limit, reserve = 1 << 20, 256 << 10
	mem := mustQuota(t, "memory-quota", limit)
	mem.SetReserve(reserve)
	require.True(t, mem.TryAcquire(limit-reserve), "others hold all but the reserve")
	p, err := NewSpanPuller(Config{Span: tableSpan(1), StartTs: 10, Consumer: nullConsumer{},
		Matcher: MatcherMemory{Memory: mem, Store: newMemPrewriteStore()}})
	require.NoError(t, err)
	_, err = p.AddRegion(1, 100, tableSpan(1))
	require.NoError(t, err)
	var rows []*cdcpb.Event_Row
	for h := int64(0); h < 1000; h++ {
		rows = append(rows, &cdcpb.Event_Row{Type: cdcpb.Event_PREWRITE, OpType: cdcpb.Event_Row_PUT, StartTs: 20, Key: rawKey(1, h), Value: []byte("v")})
	}
	_, err = p.HandleEvent(&cdcpb.Event{RegionId: 1, RequestId: 100, Event: &cdcpb.Event_Entries_{Entries: &cdcpb.Event_Entries{Entries: rows}}})
	require.NoError(t, err)
	require.Zero(t, p.MatcherBytes(), "nothing fits beside the others but the index")
	require.GreaterOrEqual(t, p.IndexBytes(), int64(tailRecords*bloomBitsPerKey/8), "the tail run's filter is charged")
	require.Equal(t, limit-reserve+p.IndexBytes(), mem.Used())
	require.LessOrEqual(t, mem.Peak(), int64(limit))
	require.Zero(t, p.Stats().IndexRefused)
	p.Release()
	require.Equal(t, int64(limit-reserve), mem.Used(), "Release gives the index charge back")
}
