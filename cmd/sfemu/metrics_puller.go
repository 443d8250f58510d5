package main

import (
	"sort"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/searchfabric/sfemu/adapter"
	"github.com/searchfabric/sfemu/upstream/logpuller"
)

// The puller's region figures and the schema store's versions on
// /metrics (SR12), read at scrape time from the copies the log puller
// publishes (logpuller T16) and from the store (schemastore SS61).

// maxRegionSeries bounds the per-region lag series: the slowest regions
// are the ones worth a look, and a real cluster can have thousands.
const maxRegionSeries = 20

var (
	mRegionsSubscribed = desc("sfemu_puller_regions_subscribed", "Live region subscriptions of the log puller, by whether the region's INITIALIZED arrived.", "state")
	mRegionLag         = desc("sfemu_puller_region_resolved_lag_seconds", "Upstream's current time minus the physical time of a region's resolved ts (its checkpoint until initialized); the 20 slowest regions.", "span", "region", "store")
	mRegionLagMax      = desc("sfemu_puller_region_resolved_lag_max_seconds", "The largest region resolved-ts lag over every live region subscription (0 with none).")
	mStoreVersion      = desc("sfemu_schemastore_schema_version", "Schema version of the last DDL job the schema store applied (0 while none since its initial snapshot).")
	mStoreTableVers    = desc("sfemu_schemastore_table_versions", "Table versions the schema store holds over every physical table (GC trims them).")
	mStoreTables       = desc("sfemu_schemastore_tables", "Live logical tables in the schema store's history.")
	mStoreEvents       = desc("sfemu_schemastore_ddl_events", "DDL events the schema store holds for the adapter's fetches.")
	mStoreResolvedLag  = desc("sfemu_schemastore_resolved_lag_seconds", "Upstream's current time minus the physical time of the schema store's resolved ts.")
	pullerDescs        = []*prometheus.Desc{mRegionsSubscribed, mRegionLag, mRegionLagMax, mStoreVersion, mStoreTableVers, mStoreTables, mStoreEvents, mStoreResolvedLag}
)

// regionLag is one region's lag for the scrape.
type regionLag struct {
	r   logpuller.RegionStat
	lag float64
}

// collectRegions adds the region figures; lag measures a ts against the
// upstream's current ts.
func collectRegions(gauge func(d *prometheus.Desc, val float64, labels ...string), regions []logpuller.RegionStat, lag func(uint64) float64) {
	initialized := 0
	lags := make([]regionLag, 0, len(regions))
	for _, r := range regions {
		if r.Initialized {
			initialized++
		}
		lags = append(lags, regionLag{r, lag(r.ResolvedTs)})
	}
	gauge(mRegionsSubscribed, float64(initialized), "initialized")
	gauge(mRegionsSubscribed, float64(len(regions)-initialized), "initializing")
	sort.SliceStable(lags, func(i, j int) bool { return lags[i].lag > lags[j].lag })
	maxLag := 0.0
	if len(lags) > 0 {
		maxLag = lags[0].lag
	}
	gauge(mRegionLagMax, maxLag)
	seen := map[[2]uint64]bool{} // a span's region once, even if two sources report it
	for _, l := range lags {
		k := [2]uint64{l.r.SubID, l.r.RegionID}
		if seen[k] || len(seen) == maxRegionSeries {
			continue
		}
		seen[k] = true
		gauge(mRegionLag, l.lag, strconv.FormatUint(l.r.SubID, 10), strconv.FormatUint(l.r.RegionID, 10), l.r.Store)
	}
}

// collectSchemaStore adds the running adapter's schema store figures.
func collectSchemaStore(gauge func(d *prometheus.Desc, val float64, labels ...string), a *adapter.Adapter, lag func(uint64) float64) {
	st := a.SchemaStoreStats()
	gauge(mStoreVersion, float64(st.SchemaVersion))
	gauge(mStoreTableVers, float64(st.TableVersions))
	gauge(mStoreTables, float64(st.Tables))
	gauge(mStoreEvents, float64(st.Events))
	gauge(mStoreResolvedLag, lag(st.ResolvedTs))
}
