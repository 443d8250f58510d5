package main

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/searchfabric/sfemu/emulator/httpapi"
)

// The adapter's and the puller's figures on /metrics (SR12; the table in
// specs/sfemu-run.md lists them). They are read from the running adapter
// at scrape time: no counter is kept twice, and the adapter's hot path
// gains nothing.

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	mAdapterState    = desc("sfemu_adapter_state", "1 for the adapter's current state (starting, snapshotting, streaming, restarting, stopped), 0 for the others.", "state")
	mAdapterEpoch    = desc("sfemu_adapter_epoch", "Source epoch of the running adapter (it grows at every restart).")
	mAdapterRestarts = desc("sfemu_adapter_restarts_total", "Adapter restarts requested over /admin/restart-adapter (table-set changes are followed in place, with no restart).")
	mAdapterRows     = desc("sfemu_adapter_rows_total", "Row changes the adapter delivered, across restarts.")
	mAdapterDDLs     = desc("sfemu_adapter_ddls_total", "DDLs the adapter applied, across restarts.")
	mAdapterFetchErr = desc("sfemu_adapter_transient_fetch_errors_total", "Transient errors fetching from the upstream that the adapter retried.")
	mCheckpointTs    = desc("sfemu_adapter_checkpoint_ts", "The adapter's last checkpoint (global resolved ts), a TSO.")
	mCheckpointLag   = desc("sfemu_adapter_checkpoint_lag_seconds", "Upstream's current time minus the physical time of the adapter's checkpoint.")
	mBufferedRows    = desc("sfemu_reorder_buffered_rows", "Rows held in a source partition's reorder buffer (unsealed and sealed).", "collection", "partition")
	mBufferedBytes   = desc("sfemu_reorder_buffered_bytes", "Bytes of unsealed rows held in a source partition's reorder buffer.", "collection", "partition")
	mPartitionLag    = desc("sfemu_source_partition_resolved_lag_seconds", "Upstream's current time minus the physical time of a source partition's stored resolved ts.", "collection", "partition")
	mStreamsOpened   = desc("sfemu_puller_streams_opened_total", "EventFeed streams the log puller opened to TiKV stores.")
	mStreamFailures  = desc("sfemu_puller_stream_failures_total", "EventFeed streams that failed and were reconnected.")
	mRegionRequests  = desc("sfemu_puller_region_requests_total", "Region subscriptions the log puller sent.")
	mLockResolutions = desc("sfemu_puller_lock_resolutions_total", "Lock resolutions the log puller ran for regions whose resolved ts was stuck.")
	mGCSafePoint     = desc("sfemu_gc_safe_point_ts", "The service GC safe point the adapter holds at PD (checkpoint - 1), a TSO.")
	mGCAge           = desc("sfemu_gc_safe_point_age_seconds", "How far the held GC safe point trails the upstream's current time.")
	mGCRenewAge      = desc("sfemu_gc_safe_point_renew_age_seconds", "Time since the adapter last renewed its GC safe point at PD.")
)

var adapterStates = []string{httpapi.AdapterStarting, httpapi.AdapterSnapshotting, httpapi.AdapterStreaming, httpapi.AdapterRestarting, httpapi.AdapterStopped}

// adapterCollector exposes the statusView's adapter as metrics.
type adapterCollector struct{ v *statusView }

func (c adapterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{mAdapterState, mAdapterEpoch, mAdapterRestarts, mAdapterRows, mAdapterDDLs, mAdapterFetchErr,
		mCheckpointTs, mCheckpointLag, mBufferedRows, mBufferedBytes, mPartitionLag, mStreamsOpened, mStreamFailures,
		mRegionRequests, mLockResolutions, mGCSafePoint, mGCAge, mGCRenewAge} {
		ch <- d
	}
	for _, d := range memoryDescs {
		ch <- d
	}
	for _, d := range pullerDescs {
		ch <- d
	}
}

func (c adapterCollector) Collect(ch chan<- prometheus.Metric) {
	v := c.v
	gauge := func(d *prometheus.Desc, val float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, val, labels...)
	}
	counter := func(d *prometheus.Desc, val float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, val)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	now, nowErr := v.up.CurrentTs(ctx)
	cancel()
	lag := func(ts uint64) float64 {
		if nowErr != nil || ts == 0 || now>>18 <= ts>>18 {
			return 0
		}
		return float64((now>>18)-(ts>>18)) / 1000
	}

	tr := v.up.TransportStats()
	counter(mStreamsOpened, float64(tr.StreamsOpened))
	counter(mStreamFailures, float64(tr.StreamFailures))
	counter(mRegionRequests, float64(tr.RegionRequests))
	counter(mLockResolutions, float64(tr.LockResolutions))
	collectRegions(gauge, v.up.RegionStats(), lag)

	v.pollSnapshot(time.Now())
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, s := range adapterStates {
		on := 0.0
		if s == v.state {
			on = 1
		}
		gauge(mAdapterState, on, s)
	}
	counter(mAdapterRestarts, float64(v.restarts))
	cur, st, total := v.current()
	counter(mAdapterRows, float64(total.RowsDelivered))
	counter(mAdapterDDLs, float64(total.DDLsDelivered))
	counter(mAdapterFetchErr, float64(total.TransientFetchErrs))
	if cur == nil {
		return
	}
	collectMemory(gauge, v.mem, cur)
	collectSchemaStore(gauge, cur, lag)
	gauge(mAdapterEpoch, float64(cur.Resume.Epoch))
	gauge(mCheckpointTs, float64(st.LastCheckpointTs))
	gauge(mCheckpointLag, lag(st.LastCheckpointTs))
	for _, ps := range cur.Bridge.Stats() {
		gauge(mBufferedRows, float64(ps.UnsealedRows+ps.SealedRows), ps.Collection, ps.Partition)
		gauge(mBufferedBytes, float64(ps.UnsealedBytes), ps.Collection, ps.Partition)
		gauge(mPartitionLag, lag(ps.ResolvedTs), ps.Collection, ps.Partition)
	}
	if cur.GC != nil {
		held := cur.GC.Held()
		gauge(mGCSafePoint, float64(held))
		gauge(mGCAge, lag(held))
		if ms := cur.GC.LastRenewMs(); ms > 0 {
			gauge(mGCRenewAge, max(0, float64(time.Now().UnixMilli()-ms)/1000))
		}
	}
}

// gatherer is what /metrics exposes: the emulator's registry and the
// adapter's figures (the HTTP API adds its own and go_*/process_*).
func gatherer(emuReg prometheus.Gatherer, v *statusView) prometheus.Gatherer {
	reg := prometheus.NewRegistry()
	reg.MustRegister(adapterCollector{v})
	return prometheus.Gatherers{emuReg, reg}
}
