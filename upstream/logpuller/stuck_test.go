package logpuller

import (
	"sort"
	"testing"

	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/stretchr/testify/require"
)

// rule: T10 (the core's planner: thresholds, cool-down, initialized regions only)
func TestStuckRegionsThresholdsAndCooldown(t *testing.T) {
	const base = int64(1_700_000_000_000)
	start := composeTs(base)
	p, _ := newTestPuller(t, start)
	full := tableSpan(1)
	mid := splitAt(50)
	_, _ = p.AddRegion(1, 100, spanOf(full.StartKey, mid))
	_, _ = p.AddRegion(2, 101, spanOf(mid, full.EndKey))
	mustHandle(t, p, rowsEv(1, 100, initialized()))

	require.Nil(t, p.StuckRegions(base, composeTs(base)), "first observation only records the ts")
	require.Nil(t, p.StuckRegions(base+10_000, composeTs(base+10_000)), "region 2 is not initialized: never resolve")
	mustHandle(t, p, rowsEv(2, 101, initialized()))
	// Region 1 advances, region 2 is pinned by a lock at start: the span
	// ts stays at start.
	p.HandleResolvedTs(resolved(composeTs(base+9_000), 100, 1))
	require.Nil(t, p.StuckRegions(base+3_000, composeTs(base+3_000)))

	tasks := p.StuckRegions(base+10_000, composeTs(base+10_000))
	require.Len(t, tasks, 1, "only the region behind the target")
	require.Equal(t, uint64(2), tasks[0].RegionID)
	require.Equal(t, composeTs(base+StuckAfterMs), tasks[0].TargetTs, "target = resolved time + 4 s, below the TSO")

	require.Nil(t, p.StuckRegions(base+12_000, composeTs(base+12_000)), "cool-down")
	tasks = p.StuckRegions(base+20_001, composeTs(base+20_001))
	require.Len(t, tasks, 1)

	// Once the span moves, the clock restarts.
	p.HandleResolvedTs(resolved(composeTs(base+20_000), 101, 2))
	require.Nil(t, p.StuckRegions(base+21_000, composeTs(base+21_000)))
	ids := []uint64{}
	for _, task := range p.StuckRegions(base+30_000, composeTs(base+26_000)) {
		ids = append(ids, task.RegionID)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	require.Equal(t, []uint64{1}, ids, "span ts is 9 s: target 13 s; only region 1 (9 s) is behind it")
}

func spanOf(start, end []byte) kvevent.Span { return kvevent.Span{StartKey: start, EndKey: end} }
