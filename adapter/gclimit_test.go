package adapter

import (
	"runtime/debug"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// RS11: LimitGC sets Go's soft memory limit to the memory quota +
// MemoryHeadroom + the bytes others report with GOGC's room, less the process's memory
// outside Go, follows others as they change, never goes below the live
// heap + MemoryHeadroom/4, and Stop restores the limit it found.
func TestRS11_MemoryLimitIsQuotaPlusHeadroomPlusOthers(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	t.Setenv("GOGC", "")
	const quota = 64 << 20
	mem, err := NewMemory(quota, 1<<30, t.TempDir())
	require.NoError(t, err)
	found := debug.SetMemoryLimit(-1)
	var others atomic.Int64
	g := mem.LimitGC(others.Load)
	t.Cleanup(g.Stop)
	want := func() int64 {
		return max(quota+MemoryHeadroom+others.Load()*2-g.nonGo, gcLiveHeap()+MemoryHeadroom/4) // GOGC=100
	}
	require.InDelta(t, want(), debug.SetMemoryLimit(-1), 1<<20, "the limit set")
	require.Equal(t, g.Limit(), debug.SetMemoryLimit(-1))
	require.Less(t, g.Limit(), int64(quota+MemoryHeadroom+1<<20), "nothing else holds memory: quota + headroom at most")

	others.Store(900 << 20) // the emulator grew
	g.refresh()
	require.InDelta(t, want(), debug.SetMemoryLimit(-1), 1<<20, "the limit follows what others hold")
	require.Greater(t, g.Limit(), int64(quota+MemoryHeadroom+1600<<20)-g.nonGo, "with GOGC's room for them")

	others.Store(0)
	g.refresh()
	require.InDelta(t, want(), debug.SetMemoryLimit(-1), 1<<20, "and comes back down")

	g.Stop()
	require.Equal(t, found, debug.SetMemoryLimit(-1), "Stop restores the limit LimitGC found")
	g.Stop() // idempotent
}

// RS11: an explicit GOMEMLIMIT from the user wins: LimitGC sets nothing.
func TestRS11_GOMEMLIMITWins(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "3GiB")
	mem, err := NewMemory(64<<20, 1<<30, t.TempDir())
	require.NoError(t, err)
	found := debug.SetMemoryLimit(-1)
	g := mem.LimitGC(nil)
	defer g.Stop()
	require.Zero(t, g.Limit())
	require.Equal(t, found, debug.SetMemoryLimit(-1), "the user's limit stays")
}

// RS11: with the emulator in process, others is the live heap the quota
// does not charge, so the limit keeps MemoryHeadroom and the unused quota
// above the live heap.
func TestRS11_UnchargedLiveIsTheLiveHeapLessTheQuota(t *testing.T) {
	mem, err := NewMemory(64<<20, 1<<30, t.TempDir())
	require.NoError(t, err)
	others := UnchargedLive(mem.Quota)
	base := others()
	require.Positive(t, base)
	require.True(t, mem.Quota.TryAcquire(8<<20))
	require.InDelta(t, base-8<<20, others(), 1<<20, "charged bytes are the adapter's, not others'")
	mem.Quota.Release(8 << 20)
}
