package grpcserver

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGCSafePointsTable covers the pure service safe point rules. (G20-G25)
func TestGCSafePointsTable(t *testing.T) {
	g := newGCSafePoints()
	now := int64(1_000_000)
	require.Equal(t, uint64(0), g.update("a", 10, 100, now), "G20: gc_worker at 0 is the minimum")
	g.observeGC(50)
	require.Equal(t, uint64(50), g.update("b", 10, 60, now))
	require.Equal(t, uint64(50), g.update("c", 10, 40, now), "G23: below the minimum is refused")
	_, ok := g.services["c"]
	require.False(t, ok)
	require.Equal(t, uint64(60), g.clampGC(1000, now), "G25: GC stops at the lowest service")
	require.Equal(t, uint64(50), g.update("b", 0, 0, now), "G22: ttl 0 removes")
	require.Equal(t, uint64(100), g.clampGC(1000, now))
	// G21: entries lapse at their TTL on the given clock.
	require.Equal(t, uint64(100), g.clampGC(1000, now+9_999))
	require.Equal(t, uint64(1000), g.clampGC(1000, now+10_000))
	// A huge TTL never overflows into the past.
	g.update("forever", math.MaxInt64, 500, now)
	require.Equal(t, int64(math.MaxInt64), g.services["forever"].ExpireMs)
	require.Equal(t, uint64(500), g.clampGC(1000, math.MaxInt64-1))
	// gc_worker never moves down.
	g.observeGC(10)
	require.Equal(t, uint64(50), g.services[gcWorkerService].SafePoint)
	ids := []string{}
	for _, s := range g.list(now) {
		ids = append(ids, s.ID)
	}
	require.Equal(t, []string{"forever", gcWorkerService}, ids)
}

// TestParseVersion: TiKV's reading of header.ticdc_version. (G52)
func TestParseVersion(t *testing.T) {
	for in, want := range map[string]semver{
		"6.5.0":         {6, 5, 0},
		"v8.5.1":        {8, 5, 1},
		"7.1.0-alpha":   {7, 1, 0},
		"5.3.0+build.1": {5, 3, 0},
		"":              {},
		"garbage":       {},
		"1.2":           {},
		"1.-2.3":        {},
	} {
		require.Equal(t, want, parseVersion(in), in)
	}
	require.True(t, parseVersion("5.3.0").atLeast(versionClusterIDCheck))
	require.False(t, parseVersion("5.2.9").atLeast(versionClusterIDCheck))
	require.True(t, parseVersion("4.0.8").atLeast(versionBatchResolved))
	require.False(t, parseVersion("4.0.7").atLeast(versionBatchResolved))
	require.True(t, parseVersion("10.0.0").atLeast(versionClusterIDCheck))
}

// FuzzParseVersion: the version parser never panics. (G52)
func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{"6.5.0", "v8.5.1-rc", "", "1..2", "99999999999999999999.1.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { _ = parseVersion(s) })
}
