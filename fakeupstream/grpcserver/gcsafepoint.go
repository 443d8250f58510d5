package grpcserver

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
)

// serviceSafePointsMeta is the cluster meta name the service table is
// saved under (G27).
const serviceSafePointsMeta = "pd/service-gc-safe-points"

// marshal renders the service table for the cluster's meta (sorted, so an
// unchanged table renders the same bytes).
func (g *gcSafePoints) marshal() []byte {
	out := make([]serviceSafePoint, 0, len(g.services))
	for _, s := range g.services {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	b, _ := json.Marshal(out) // plain structs: cannot fail
	return b
}

// restore loads a table saved by marshal (nil: keep the seeded one).
func (g *gcSafePoints) restore(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	var in []serviceSafePoint
	if err := json.Unmarshal(b, &in); err != nil {
		return fmt.Errorf("grpcserver: saved service GC safe points %q: %w", b, err)
	}
	for _, s := range in {
		if s.ID == "" {
			return fmt.Errorf("grpcserver: saved service GC safe point without an id in %q", b)
		}
		g.services[s.ID] = s
	}
	return nil
}

// gcWorkerService is the service id PD seeds its service safe point table
// with (TiDB's GC worker owns it). It never expires. (G20)
const gcWorkerService = "gc_worker"

// serviceSafePoint is one PD service GC safe point.
type serviceSafePoint struct {
	ID        string
	SafePoint uint64
	// ExpireMs is the cluster-clock instant the entry lapses at
	// (math.MaxInt64: never).
	ExpireMs int64
}

// gcSafePoints is PD's GC bookkeeping: the GC safe point and the service
// safe points. It is pure: callers pass the current time and hold a lock.
type gcSafePoints struct {
	services map[string]serviceSafePoint
}

func newGCSafePoints() *gcSafePoints {
	return &gcSafePoints{services: map[string]serviceSafePoint{
		gcWorkerService: {ID: gcWorkerService, SafePoint: 0, ExpireMs: math.MaxInt64},
	}}
}

// expire drops entries whose TTL has run out at nowMs. (G21)
func (g *gcSafePoints) expire(nowMs int64) {
	for id, s := range g.services {
		if s.ExpireMs <= nowMs {
			delete(g.services, id)
		}
	}
}

// min returns the live service safe point with the smallest value (ties
// broken by id) and whether any exists.
func (g *gcSafePoints) min(nowMs int64) (serviceSafePoint, bool) {
	g.expire(nowMs)
	var best serviceSafePoint
	found := false
	for _, s := range g.services {
		if !found || s.SafePoint < best.SafePoint || (s.SafePoint == best.SafePoint && s.ID < best.ID) {
			best, found = s, true
		}
	}
	return best, found
}

// update applies UpdateServiceGCSafePoint as PD does (G22-G24):
//   - ttl <= 0 removes serviceID and answers the minimum of the rest;
//   - otherwise the entry is stored (expiring ttl seconds after nowMs) only
//     when safePoint is at or above the current minimum; a lower value is
//     refused silently and the caller learns the minimum it must respect.
//
// It returns the minimum service safe point after the call (0 if none).
func (g *gcSafePoints) update(serviceID string, ttl int64, safePoint uint64, nowMs int64) uint64 {
	if ttl <= 0 {
		delete(g.services, serviceID)
		m, _ := g.min(nowMs)
		return m.SafePoint
	}
	m, ok := g.min(nowMs)
	if ok && safePoint < m.SafePoint {
		return m.SafePoint
	}
	expire := int64(math.MaxInt64)
	if ttl < (math.MaxInt64-nowMs)/1000 {
		expire = nowMs + ttl*1000
	}
	g.services[serviceID] = serviceSafePoint{ID: serviceID, SafePoint: safePoint, ExpireMs: expire}
	m, _ = g.min(nowMs)
	return m.SafePoint
}

// list returns the live entries sorted by id.
func (g *gcSafePoints) list(nowMs int64) []serviceSafePoint {
	g.expire(nowMs)
	out := make([]serviceSafePoint, 0, len(g.services))
	for _, s := range g.services {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// clampGC bounds a requested GC safe point by the smallest safe point of
// the services other than the GC worker itself, so a registered service
// keeps its history. (G25)
func (g *gcSafePoints) clampGC(target uint64, nowMs int64) uint64 {
	g.expire(nowMs)
	for _, s := range g.services {
		if s.ID != gcWorkerService && s.SafePoint < target {
			target = s.SafePoint
		}
	}
	return target
}

// observeGC moves the gc_worker entry up to the cluster's GC safe point:
// TiDB's GC worker registers its progress under that id before it
// advances the GC safe point, so the minimum never exceeds what was
// collected. (G20)
func (g *gcSafePoints) observeGC(sp uint64) {
	w := g.services[gcWorkerService]
	if w.ID == "" {
		w = serviceSafePoint{ID: gcWorkerService, ExpireMs: math.MaxInt64}
	}
	if sp > w.SafePoint {
		w.SafePoint = sp
	}
	g.services[gcWorkerService] = w
}
