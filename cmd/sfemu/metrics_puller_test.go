package main

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/searchfabric/sfemu/upstream/logpuller"
)

// SR12: the region figures count initialized and initializing regions,
// report the slowest lag, and keep at most maxRegionSeries per-region
// series (the slowest, each span's region once).
func TestCollectRegionsBoundedSlowestFirst(t *testing.T) {
	var regions []logpuller.RegionStat
	for i := uint64(1); i <= 30; i++ {
		regions = append(regions, logpuller.RegionStat{SubID: 1, RegionID: i, Store: "s", Initialized: i%3 != 0, ResolvedTs: i})
	}
	regions = append(regions, regions[0]) // a second source reporting the same region
	got := map[*prometheus.Desc][]float64{}
	labels := map[string]bool{}
	gauge := func(d *prometheus.Desc, v float64, l ...string) {
		got[d] = append(got[d], v)
		if d == mRegionLag {
			labels[l[1]] = true
		}
	}
	lag := func(ts uint64) float64 { return float64(100 - ts) } // region 1 is the slowest
	collectRegions(gauge, regions, lag)
	if s := got[mRegionsSubscribed]; len(s) != 2 || s[0] != 21 || s[1] != 10 {
		t.Errorf("regions subscribed (initialized, initializing) = %v, want [21 10]", s)
	}
	if m := got[mRegionLagMax]; len(m) != 1 || m[0] != 99 {
		t.Errorf("max lag = %v, want [99]", m)
	}
	if n := len(got[mRegionLag]); n != maxRegionSeries {
		t.Errorf("%d per-region series, want %d", n, maxRegionSeries)
	}
	for _, want := range []string{"1", "20"} {
		if !labels[want] {
			t.Errorf("slowest region %s missing from %v", want, labels)
		}
	}
	if labels["21"] {
		t.Errorf("region 21 is not among the 20 slowest: %v", labels)
	}
	empty := map[*prometheus.Desc][]float64{}
	collectRegions(func(d *prometheus.Desc, v float64, _ ...string) { empty[d] = append(empty[d], v) }, nil, lag)
	if len(empty[mRegionLag]) != 0 || len(empty[mRegionLagMax]) != 1 || empty[mRegionLagMax][0] != 0 {
		t.Errorf("no region: %v", empty)
	}
}
