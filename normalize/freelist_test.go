package normalize

import (
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/searchfabric/sfemu/memquota"
	"github.com/searchfabric/sfemu/minicdc"
)

// N45: the slab chunks of released rows are kept for reuse only up to
// 32 (maxFreeChunks): after a bridge held and dropped ~1,000 chunks of rows,
// the heap keeps at most that many chunks (measured after a GC), and the
// rest went back to the GC.
func TestN45_FreeChunkListIsBounded(t *testing.T) {
	mem, err := memquota.New("memory-quota", 1<<30) // no per-partition row bound (N40)
	require.NoError(t, err)
	h := newHarness(t, newFakeSink(), Config{Tables: []Table{{PhysicalID: 42, SchemaID: 2, Database: "shop", Info: mt(intPKTable(42, "items"))}},
		Spill: SpillConfig{Memory: mem}})
	title := strings.Repeat("t", 200)
	const n = 150_000 // ~160 rows a chunk: ~950 chunks
	ti := mt(h.ti[42])
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < n; i++ {
		require.NoError(t, h.b.AddRow(h.ctx, RowInput{TableID: 42, CommitTs: 200, RowType: minicdc.RowTypeInsert, Post: row(int64(i), title, int64(i)), TableInfo: ti}))
	}
	require.NoError(t, h.b.Release())
	runtime.GC()
	runtime.ReadMemStats(&after)
	kept := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	bound := int64(32*chunkBytes) + 1<<20 // N45's 32 chunks, and the bridge's own state
	t.Logf("after %d rows held and dropped the heap keeps %d B (%.1f chunks); bound %d B", n, kept, float64(kept)/float64(chunkBytes), bound)
	require.LessOrEqual(t, kept, bound, "the free list keeps at most 32 chunks")
	runtime.KeepAlive(h)
}
