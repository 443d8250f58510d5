package adapter

import (
	"sync"

	"github.com/searchfabric/sfemu/upstream/logpuller"
)

// sourceStats remembers the gRPC sources an Upstream opened, so the
// binary's metrics can sum their transport counters (stream reconnects,
// region requests, lock resolutions) across adapter restarts. A source is
// small once closed; restarts are rare.
type sourceStats struct {
	mu   sync.Mutex
	srcs []*logpuller.GRPCSource
}

func (s *sourceStats) add(src *logpuller.GRPCSource) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.srcs = append(s.srcs, src)
}

// TransportStats sums the transport counters of every gRPC source this
// upstream opened (zero in process, where there is no transport).
func (u *Upstream) TransportStats() logpuller.TransportStatsSnapshot {
	u.sources.mu.Lock()
	srcs := append([]*logpuller.GRPCSource(nil), u.sources.srcs...)
	u.sources.mu.Unlock()
	var out logpuller.TransportStatsSnapshot
	for _, s := range srcs {
		st := s.Stats()
		out.StreamsOpened += st.StreamsOpened
		out.StreamFailures += st.StreamFailures
		out.V1Fallbacks += st.V1Fallbacks
		out.RegionRequests += st.RegionRequests
		out.Deregisters += st.Deregisters
		out.LockResolutions += st.LockResolutions
	}
	return out
}
