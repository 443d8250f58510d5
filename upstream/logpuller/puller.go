package logpuller

import (
	"bytes"
	"fmt"

	"github.com/pingcap/kvproto/pkg/cdcpb"

	"github.com/searchfabric/sfemu/internal/invariants"
	"github.com/searchfabric/sfemu/upstream/kvevent"
)

// DefaultMatcherQuota caps the bytes of unmatched PREWRITE payloads one span
// may hold (all its regions together).
const DefaultMatcherQuota = 256 << 20

// Config describes one subscribed span.
type Config struct {
	// Span is the subscribed span in comparable form (a table record span).
	Span kvevent.Span
	// StartTs is the subscription's start ts: rows with commit_ts <= StartTs
	// are never delivered, and the span's resolved ts starts here.
	StartTs uint64
	// Consumer receives rows and span resolved-ts advances synchronously.
	Consumer kvevent.Consumer
	// MatcherQuota caps the bytes of unmatched prewrites; 0 means
	// DefaultMatcherQuota. Exceeding it fails the region that pushed it over
	// (RetryMatcherQuota) instead of growing without bound.
	MatcherQuota int
	// Matcher adds the shared memory quota and the spill store
	// (LP13-LP16); its zero value keeps LP11 alone.
	Matcher MatcherMemory
}

// Stats counts what the core dropped and why (exported for metrics/tests).
type Stats struct {
	Rows             uint64 // rows delivered to the consumer
	StaleEvents      uint64 // events of a replaced or unknown subscription
	StaleCommits     uint64 // COMMIT rows at or below the region checkpoint
	OutOfSpan        uint64 // rows outside the subscribed span
	Duplicates       uint64 // re-delivered rows suppressed
	BelowResolved    uint64 // rows at or below the span's emitted resolved ts
	DroppedCommits   uint64 // cached commits still unmatched at INITIALIZED
	RegionFailures   uint64
	ResolvedIgnored  uint64 // resolved ts before INITIALIZED or not increasing
	SpillRuns        uint64 // runs of prewrites written (LP14)
	SpilledPrewrites uint64 // prewrites written to runs
	MatchedFromDisk  uint64 // COMMITs and ROLLBACKs resolved against a run
	DeliveredRuns    uint64 // runs of the delivered set written (LP17)
	IndexRefused     uint64 // run index charges neither the quota nor its reserve could take (LP18)
}

type regionState struct {
	regionID     uint64
	requestID    uint64
	span         kvevent.Span
	checkpointTs uint64
	resolvedTs   uint64
	initialized  bool
	m            *matcher
}

// SpanPuller is the pure puller core of one span. It is not safe for
// concurrent use: the transport serializes calls per span.
type SpanPuller struct {
	cfg       Config
	quota     int
	rawStart  []byte
	rawEnd    []byte // nil = +inf
	regions   map[uint64]*regionState
	front     *frontier
	emittedTs uint64
	delivered *deliveredSet
	// deliveredCharged is the delivered set's bytes charged to the memory
	// quota; deliveredRuns hold its rows that did not fit (LP17).
	deliveredCharged int64
	deliveredRuns    []deliveredRun
	deliveredSpilled int64  // charged to mm.Disk by deliveredRuns
	deliveredKey     []byte // scratch of seenDelivered
	indexBytes       int64  // run indexes charged to mm.Memory (LP18)
	heldBytes        int
	mm               MatcherMemory
	// spilledBytes is charged against mm.Disk by this span's runs.
	spilledBytes int64
	// spillErr is a spill failure: sticky, every later event returns it.
	spillErr *FatalError
	batch    []kvevent.RawKVEntry
	stats    Stats
	stuck    stuckState
}

// NewSpanPuller creates the core for one span. The span keys must be
// comparable (EncodeBytes) keys; decodeComparable turns them into raw bounds
// for the per-row span filter.
func NewSpanPuller(cfg Config) (*SpanPuller, error) {
	if cfg.Consumer == nil {
		return nil, fmt.Errorf("logpuller: nil consumer")
	}
	if !startBeforeEnd(cfg.Span.StartKey, cfg.Span.EndKey) {
		return nil, fmt.Errorf("logpuller: empty span [%x, %x)", cfg.Span.StartKey, cfg.Span.EndKey)
	}
	p := &SpanPuller{
		cfg:       cfg,
		quota:     cfg.MatcherQuota,
		mm:        cfg.Matcher,
		regions:   make(map[uint64]*regionState),
		front:     newFrontier(cfg.Span, cfg.StartTs),
		emittedTs: cfg.StartTs,
		delivered: newDeliveredSet(),
	}
	if p.quota <= 0 {
		p.quota = DefaultMatcherQuota
	}
	var err error
	if p.rawStart, err = rawBound(cfg.Span.StartKey); err != nil {
		return nil, fmt.Errorf("logpuller: span start key: %w", err)
	}
	if len(cfg.Span.EndKey) > 0 {
		if p.rawEnd, err = rawBound(cfg.Span.EndKey); err != nil {
			// Not a valid comparable key (e.g. an 0xFF.. upper-bound hack):
			// treat it as +inf; the region ranges still bound the data.
			p.rawEnd = nil
		}
	}
	return p, nil
}

// ResolvedTs is the span's last emitted resolved ts.
func (p *SpanPuller) ResolvedTs() uint64 { return p.emittedTs }

// Stats returns a copy of the counters.
func (p *SpanPuller) Stats() Stats { return p.stats }

// Holes lists the parts of the span no region currently holds, each with the
// checkpoint to subscribe it from.
func (p *SpanPuller) Holes() []Hole { return p.front.holes() }

// RegionCount is the number of live region subscriptions.
func (p *SpanPuller) RegionCount() int { return len(p.regions) }

// MatcherBytes is the payload held in memory by unmatched prewrites.
func (p *SpanPuller) MatcherBytes() int { return p.heldBytes }

// MatcherSpilledBytes is what the span's prewrite runs are charged on
// the spill quota.
func (p *SpanPuller) MatcherSpilledBytes() int64 { return p.spilledBytes }

// AddRegion records a region subscription for sub (comparable, inside the
// span and inside one unlocked hole) under requestID and returns the
// checkpoint ts the request must carry. A *RangeLockedError means another
// region holds part of sub: retry only Holes().
func (p *SpanPuller) AddRegion(regionID, requestID uint64, sub kvevent.Span) (uint64, error) {
	if _, ok := p.regions[regionID]; ok {
		return 0, fmt.Errorf("logpuller: region %d is already subscribed on this span (duplicate request)", regionID)
	}
	ts, err := p.front.lock(sub, regionID)
	if err != nil {
		return 0, err
	}
	p.regions[regionID] = &regionState{
		regionID:     regionID,
		requestID:    requestID,
		span:         cloneSpan(sub),
		checkpointTs: ts,
		resolvedTs:   ts,
		m:            newMatcher(),
	}
	return ts, nil
}

// RetryReason says why a region subscription ended.
type RetryReason int

const (
	RetryNotLeader RetryReason = iota + 1
	RetryEpochNotMatch
	RetryRegionNotFound
	RetryServerIsBusy
	RetryCongested
	RetryUnknownError
	RetryStreamFailure
	RetryMatcherQuota
)

func (r RetryReason) String() string {
	switch r {
	case RetryNotLeader:
		return "not_leader"
	case RetryEpochNotMatch:
		return "epoch_not_match"
	case RetryRegionNotFound:
		return "region_not_found"
	case RetryServerIsBusy:
		return "server_is_busy"
	case RetryCongested:
		return "congested"
	case RetryUnknownError:
		return "unknown_error"
	case RetryStreamFailure:
		return "stream_failure"
	case RetryMatcherQuota:
		return "matcher_quota"
	}
	return fmt.Sprintf("reason(%d)", int(r))
}

// RegionRetry tells the transport that a region subscription ended and its
// sub-span must be re-located and re-subscribed from Ts.
type RegionRetry struct {
	RegionID uint64
	Span     kvevent.Span
	Ts       uint64
	Reason   RetryReason
	// Err is the region error TiKV sent (nil for stream failures and quota).
	Err *cdcpb.Error
}

func (r *RegionRetry) String() string {
	return fmt.Sprintf("region %d %s: re-subscribe [%x, %x) from %d", r.RegionID, r.Reason, r.Span.StartKey, r.Span.EndKey, r.Ts)
}

// FatalError is a protocol violation or an unrecoverable server answer: the
// feed must stop (fail-fast), never continue past it.
type FatalError struct {
	RegionID uint64
	Reason   string
}

func (e *FatalError) Error() string {
	return fmt.Sprintf("logpuller: fatal on region %d: %s", e.RegionID, e.Reason)
}

// FailRegion ends a region subscription (stream failure, transport-side
// error) and returns what to re-subscribe.
func (p *SpanPuller) FailRegion(regionID uint64, reason RetryReason, cause *cdcpb.Error) *RegionRetry {
	st, ok := p.regions[regionID]
	if !ok {
		return nil
	}
	if invariants.Enabled {
		checkMatcher(regionID, st.m)
	}
	delete(p.regions, regionID)
	p.dropMatcher(st)
	span, ts, _ := p.front.unlock(regionID)
	p.stats.RegionFailures++
	return &RegionRetry{RegionID: regionID, Span: cloneSpan(span), Ts: ts, Reason: reason, Err: cause}
}

// HandleEvent processes one event of this span. It returns a RegionRetry
// when the event ended the region's subscription, and an error (a
// *FatalError) when the feed must stop.
func (p *SpanPuller) HandleEvent(ev *cdcpb.Event) (*RegionRetry, error) {
	if p.spillErr != nil {
		return nil, p.spillErr
	}
	st := p.regions[ev.RegionId]
	if st == nil || (ev.RequestId != 0 && ev.RequestId != st.requestID) {
		// A leftover of a replaced subscription: TiKV may still be
		// sending for the old request id.
		p.stats.StaleEvents++
		return nil, nil
	}
	switch e := ev.Event.(type) {
	case *cdcpb.Event_Entries_:
		if e.Entries == nil {
			return nil, nil
		}
		retry, err := p.handleRows(st, e.Entries.Entries)
		if ferr := p.flush(); err == nil {
			err = ferr
		}
		if invariants.Enabled {
			p.checkHeld()
		}
		return retry, err
	case *cdcpb.Event_Error:
		return p.handleError(st, e.Error)
	case *cdcpb.Event_ResolvedTs:
		// Deprecated per-region form (TiKV < 4.0.8).
		p.forwardRegion(st, e.ResolvedTs)
		p.maybeAdvance()
		return nil, nil
	default:
		// Admin and long-txn events carry nothing for the client.
		return nil, nil
	}
}

// HandleResolvedTs processes a batched resolved ts. With stream
// multiplexing the batch carries the request id; regions of other
// subscriptions are skipped.
func (p *SpanPuller) HandleResolvedTs(rts *cdcpb.ResolvedTs) {
	if rts == nil || rts.Ts == 0 {
		p.stats.ResolvedIgnored++
		return
	}
	for _, id := range rts.Regions {
		st := p.regions[id]
		if st == nil || (rts.RequestId != 0 && rts.RequestId != st.requestID) {
			continue
		}
		p.forwardRegion(st, rts.Ts)
	}
	p.maybeAdvance()
}

func (p *SpanPuller) forwardRegion(st *regionState, ts uint64) {
	if !st.initialized || ts <= st.resolvedTs {
		p.stats.ResolvedIgnored++
		return
	}
	st.resolvedTs = ts
	p.front.forward(st.regionID, ts)
}

func (p *SpanPuller) maybeAdvance() {
	if invariants.Enabled {
		p.checkEmitted(false)
	}
	m := p.front.min()
	if m <= p.emittedTs {
		return
	}
	p.emittedTs = m
	p.delivered.prune(m)
	p.pruneDeliveredRuns(m)
	if err := p.chargeDelivered(); err != nil && p.spillErr == nil {
		p.spillErr = asFatal(err, "delivered-set spill")
	}
	p.cfg.Consumer.AdvanceResolvedTs(m)
}

func (p *SpanPuller) handleError(st *regionState, e *cdcpb.Error) (*RegionRetry, error) {
	switch {
	case e == nil:
		return p.FailRegion(st.regionID, RetryUnknownError, e), nil
	case e.DuplicateRequest != nil:
		return nil, &FatalError{RegionID: st.regionID, Reason: "duplicate_request: the region was registered twice on one stream"}
	case e.Compatibility != nil:
		return nil, &FatalError{RegionID: st.regionID, Reason: "compatibility: " + e.Compatibility.String()}
	case e.ClusterIdMismatch != nil:
		return nil, &FatalError{RegionID: st.regionID, Reason: fmt.Sprintf("cluster_id_mismatch: server %d, request %d",
			e.ClusterIdMismatch.Current, e.ClusterIdMismatch.Request)}
	case e.NotLeader != nil:
		return p.FailRegion(st.regionID, RetryNotLeader, e), nil
	case e.EpochNotMatch != nil:
		return p.FailRegion(st.regionID, RetryEpochNotMatch, e), nil
	case e.RegionNotFound != nil:
		return p.FailRegion(st.regionID, RetryRegionNotFound, e), nil
	case e.ServerIsBusy != nil:
		return p.FailRegion(st.regionID, RetryServerIsBusy, e), nil
	case e.Congested != nil:
		return p.FailRegion(st.regionID, RetryCongested, e), nil
	default:
		// An error kind newer than the pinned proto decodes with every
		// known field nil: retry the region.
		return p.FailRegion(st.regionID, RetryUnknownError, e), nil
	}
}

func (p *SpanPuller) handleRows(st *regionState, rows []*cdcpb.Event_Row) (*RegionRetry, error) {
	for _, r := range rows {
		switch r.Type {
		case cdcpb.Event_INITIALIZED:
			if err := p.initialize(st); err != nil {
				return nil, err
			}
		case cdcpb.Event_COMMITTED:
			if err := p.emit(st, r); err != nil {
				return nil, err
			}
		case cdcpb.Event_PREWRITE:
			if retry, err := p.holdPrewrite(st, r); retry != nil || err != nil {
				return retry, err
			}
		case cdcpb.Event_COMMIT:
			if r.CommitTs <= st.checkpointTs {
				// Already part of the data below the checkpoint; still
				// match so the cache is cleaned.
				if _, err := p.matchCommit(st, r, true); err != nil {
					return nil, err
				}
				p.stats.StaleCommits++
				continue
			}
			matched, err := p.matchCommit(st, r, st.initialized)
			if err != nil {
				return nil, err
			}
			if !matched {
				if st.initialized {
					return nil, &FatalError{RegionID: st.regionID, Reason: fmt.Sprintf(
						"COMMIT without matching PREWRITE after INITIALIZED (key %x start_ts %d commit_ts %d)", r.Key, r.StartTs, r.CommitTs)}
				}
				st.m.cachedCommits = append(st.m.cachedCommits, cloneRow(r))
				continue
			}
			if err := p.emit(st, r); err != nil {
				return nil, err
			}
		case cdcpb.Event_ROLLBACK:
			if st.initialized {
				if _, _, err := p.take(st, matchKey{startTs: r.StartTs, key: bytesView(r.Key)}, true); err != nil {
					return nil, err
				}
			} else {
				st.m.cachedRollbacks = append(st.m.cachedRollbacks, cloneRow(r))
			}
		default:
			return nil, &FatalError{RegionID: st.regionID, Reason: fmt.Sprintf("row of unknown log type %d (key %x)", int32(r.Type), r.Key)}
		}
	}
	return nil, nil
}

func (p *SpanPuller) initialize(st *regionState) error {
	if st.initialized {
		return nil
	}
	st.initialized = true
	for _, c := range st.m.cachedCommits {
		matched, err := p.matchCommit(st, c, true)
		if err != nil {
			return err
		}
		if !matched {
			// The incremental scan already delivered it as COMMITTED.
			p.stats.DroppedCommits++
			continue
		}
		if err := p.emit(st, c); err != nil {
			return err
		}
	}
	for _, r := range st.m.cachedRollbacks {
		if _, _, err := p.take(st, matchKey{startTs: r.StartTs, key: bytesView(r.Key)}, true); err != nil {
			return err
		}
	}
	st.m.cachedCommits, st.m.cachedRollbacks = nil, nil
	return nil
}

func (p *SpanPuller) emit(st *regionState, r *cdcpb.Event_Row) error {
	if r.CommitTs <= st.resolvedTs {
		return &FatalError{RegionID: st.regionID, Reason: fmt.Sprintf(
			"commit_ts %d of key %x is not above the region's resolved ts %d: data would be lost", r.CommitTs, r.Key, st.resolvedTs)}
	}
	if !p.inSpan(r.Key) {
		p.stats.OutOfSpan++
		return nil
	}
	if r.CommitTs <= p.emittedTs {
		p.stats.BelowResolved++
		return nil
	}
	var op kvevent.OpType
	switch r.OpType {
	case cdcpb.Event_Row_PUT:
		op = kvevent.OpTypePut
	case cdcpb.Event_Row_DELETE:
		op = kvevent.OpTypeDelete
	default:
		return &FatalError{RegionID: st.regionID, Reason: fmt.Sprintf("row of key %x commit_ts %d has op type %d", r.Key, r.CommitTs, int32(r.OpType))}
	}
	dup, err := p.seenDelivered(r.CommitTs, r.StartTs, r.Key)
	if err != nil {
		return p.spillFatal(st, err)
	}
	if dup || !p.delivered.add(r.CommitTs, r.StartTs, r.Key) {
		p.stats.Duplicates++
		return nil
	}
	if err := p.chargeDelivered(); err != nil {
		return p.spillFatal(st, err)
	}
	p.batch = append(p.batch, kvevent.RawKVEntry{
		OpType:   op,
		Key:      r.Key,
		Value:    r.Value,
		OldValue: r.OldValue,
		StartTs:  r.StartTs,
		CRTs:     r.CommitTs,
		RegionID: st.regionID,
	})
	return nil
}

func (p *SpanPuller) flush() error {
	if len(p.batch) == 0 {
		return nil
	}
	if invariants.Enabled {
		p.checkEmitted(true)
	}
	p.stats.Rows += uint64(len(p.batch))
	p.cfg.Consumer.ConsumeKV(p.batch)
	clear(p.batch)
	p.batch = p.batch[:0]
	return nil
}

func (p *SpanPuller) inSpan(rawKey []byte) bool {
	if bytes.Compare(rawKey, p.rawStart) < 0 {
		return false
	}
	return p.rawEnd == nil || bytes.Compare(rawKey, p.rawEnd) < 0
}

func cloneRow(r *cdcpb.Event_Row) *cdcpb.Event_Row {
	c := *r
	c.Key = cloneBytes(r.Key)
	c.Value = cloneBytes(r.Value)
	c.OldValue = cloneBytes(r.OldValue)
	return &c
}

// matchCommit fills a COMMIT row's value and old value from its PREWRITE,
// in memory or spilled (LP1, LP14). Before INITIALIZED, a cached prewrite
// with an empty value does not match (the incremental scan will deliver
// the row as COMMITTED).
func (p *SpanPuller) matchCommit(st *regionState, r *cdcpb.Event_Row, initialized bool) (bool, error) {
	e, ok, err := p.take(st, matchKey{startTs: r.StartTs, key: bytesView(r.Key)}, initialized)
	if err != nil || !ok {
		return false, err
	}
	r.Value, r.OldValue = e.value, e.oldValue
	return true, nil
}
