package grpcserver

import (
	"time"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/tso"
)

// DefaultGCLifeTime is TiDB's default tikv_gc_life_time: how much
// history the GC worker keeps.
const DefaultGCLifeTime = 10 * time.Minute

// gcPolicy is TiDB's GC worker as the cluster's background GC asks it
// (G28): the safe point may move to now − lifetime, but never past the
// safe point of a live service other than gc_worker (the adapter's hold
// at its checkpoint, TiCDC's changefeeds), exactly as UpdateGCSafePoint
// clamps it (G25).
func (p *pdServer) gcPolicy(lifetime time.Duration) fakeupstream.GCPolicy {
	return func(nowTs uint64) uint64 {
		ms := tso.Physical(nowTs) - lifetime.Milliseconds()
		if ms <= 0 {
			return 0
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		p.gc.observeGC(p.gcSafePoint())
		return p.gc.clampGC(tso.Compose(ms, 0), p.s.c.NowMs())
	}
}
