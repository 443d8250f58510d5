package logpuller

import "github.com/searchfabric/sfemu/upstream/kvevent"

// Lock-resolution thresholds (TiCDC's current values; see facts §3): a span
// whose resolved ts has not moved for StuckAfterMs and lags the physical
// clock by as much has its regions' locks resolved up to
// min(current ts, resolved time + StuckAfterMs); a region is not resolved
// again within ResolveCooldownMs.
const (
	StuckAfterMs      = 4000
	ResolveCooldownMs = 10000
)

// LockResolveTask asks the transport to resolve the locks of one region
// below TargetTs (ScanLock + the lock resolver).
type LockResolveTask struct {
	RegionID uint64
	Span     kvevent.Span
	TargetTs uint64
}

type stuckState struct {
	seenTs       uint64 // emitted resolved ts when last observed
	seenAtMs     int64  // when it was first observed at that value
	lastResolved map[uint64]int64
}

func physicalMs(ts uint64) int64 { return int64(ts >> 18) }

func composeTs(ms int64) uint64 { return uint64(ms) << 18 }

// StuckRegions is called by the transport on a tick with the physical clock
// and a fresh TSO. It returns the regions whose locks must be resolved,
// and records the attempt for the cool-down. Regions not yet INITIALIZED
// are never resolved (their lock may predate the subscription; TiKV's scan
// reports it and it is matched normally).
func (p *SpanPuller) StuckRegions(nowMs int64, currentTs uint64) []LockResolveTask {
	st := &p.stuck
	if st.lastResolved == nil {
		st.lastResolved = make(map[uint64]int64)
	}
	if st.seenTs != p.emittedTs || st.seenAtMs == 0 {
		st.seenTs, st.seenAtMs = p.emittedTs, nowMs
		return nil
	}
	if nowMs-st.seenAtMs < StuckAfterMs || nowMs-physicalMs(p.emittedTs) < StuckAfterMs {
		return nil
	}
	for _, r := range p.regions {
		if !r.initialized {
			return nil // the span is not fully initialized yet
		}
	}
	target := composeTs(physicalMs(p.emittedTs) + StuckAfterMs)
	if currentTs < target {
		target = currentTs
	}
	var out []LockResolveTask
	for id, r := range p.regions {
		if r.resolvedTs >= target {
			continue
		}
		if at, ok := st.lastResolved[id]; ok && nowMs-at < ResolveCooldownMs {
			continue
		}
		st.lastResolved[id] = nowMs
		out = append(out, LockResolveTask{RegionID: id, Span: cloneSpan(r.span), TargetTs: target})
	}
	for id := range st.lastResolved {
		if _, live := p.regions[id]; !live {
			delete(st.lastResolved, id)
		}
	}
	return out
}
