package logpuller

import (
	"sort"
	"sync/atomic"
	"time"
)

// Read-only figures of the live region subscriptions, for the binary's
// metrics (per-region resolved-ts lag, regions subscribed; specs/
// logpuller.md T16). The driver and its cores belong to one goroutine, so
// the gRPC transport publishes a copy from that goroutine (at most once per
// RegionStatsEvery) and any goroutine reads the last copy.

// RegionStat is one live region subscription.
type RegionStat struct {
	// SubID is the subscription (span) the region belongs to.
	SubID    uint64
	RegionID uint64
	// Store is the address of the store the region is registered on.
	Store string
	// Initialized is false until the region's INITIALIZED arrived (its
	// resolved ts does not move before, LP rules).
	Initialized bool
	// ResolvedTs is the region's resolved ts (its checkpoint until it
	// initialized).
	ResolvedTs uint64
}

// RegionStatsEvery bounds how often the gRPC transport copies the region
// figures: a scrape sees them at most this old (plus one event's wait).
const RegionStatsEvery = time.Second

// RegionStats lists the live regions of every subscription, ordered by
// (SubID, RegionID). Call it on the driver's goroutine.
func (d *Driver) RegionStats() []RegionStat {
	var out []RegionStat
	for _, sub := range d.all {
		for id, lr := range sub.regions {
			rs := RegionStat{SubID: sub.id, RegionID: id}
			if lr.st != nil {
				rs.Store = lr.st.Addr
			}
			if st := sub.puller.regions[id]; st != nil {
				rs.Initialized, rs.ResolvedTs = st.initialized, st.resolvedTs
			}
			out = append(out, rs)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].SubID != out[j].SubID {
			return out[i].SubID < out[j].SubID
		}
		return out[i].RegionID < out[j].RegionID
	})
	return out
}

// regionBoard holds the transport's last published copy.
type regionBoard struct {
	every time.Duration // 0: RegionStatsEvery (tests shorten it)
	at    time.Time     // when the driver's goroutine last copied (its clock)
	snap  atomic.Pointer[[]RegionStat]
}

// publish copies the driver's regions when the last copy is older than
// RegionStatsEvery. Driver goroutine only.
func (b *regionBoard) publish(d *Driver, now time.Time) {
	every := b.every
	if every == 0 {
		every = RegionStatsEvery
	}
	if !b.at.IsZero() && now.Sub(b.at) < every {
		return
	}
	b.at = now
	rs := d.RegionStats()
	b.snap.Store(&rs)
}

// clear drops the copy: a stopped transport has no live region.
func (b *regionBoard) clear() { b.snap.Store(nil) }

// RegionStats is the last copy of the live regions (nil before Run's first
// round and after Run returned). Safe from any goroutine.
func (s *GRPCSource) RegionStats() []RegionStat {
	if p := s.regions.snap.Load(); p != nil {
		return *p
	}
	return nil
}
