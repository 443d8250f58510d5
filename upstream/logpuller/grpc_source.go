package logpuller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pingcap/kvproto/pkg/cdcpb"
	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	"github.com/pingcap/kvproto/pkg/metapb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/searchfabric/sfemu/upstream/kvevent"
)

// GRPCSource is the real kvevent.Source: it speaks TiKV's ChangeData
// protocol over gRPC. One goroutine (Run) owns every span's puller core and
// all bookkeeping; each open stream has a sender and a receiver goroutine
// that only move messages between gRPC and Run. Consumers are therefore
// called from Run's goroutine, one call at a time (the core is not
// concurrent), and may call Subscribe.
//
// Streams: with EventFeedV2 one stream per store carries every span's
// regions (stream multiplexing; the span's request id routes events and
// batched resolved ts). When a store answers V2 with Unimplemented the
// store is switched to v1 EventFeed, where one stream per (span, store)
// carries that span's regions, each region once with a fresh request id;
// closing that stream is the only way to drop them. Rules: specs/logpuller.md
// (T1..).
type GRPCSource struct {
	cfg TransportConfig

	newMu   sync.Mutex
	newSubs []*grpcSub
	wake    chan struct{}

	events chan streamMsg

	connMu sync.Mutex
	conns  map[string]*grpc.ClientConn
	closed bool

	// Owned by Run.
	subs        map[uint64]*grpcSub // by request id (V2 routing)
	all         []*grpcSub
	stores      map[string]*storeState
	streams     map[streamKey]*feedStream
	nextReq     uint64
	dirty       bool
	pending     bool
	baseCtx     context.Context
	baseCancel  context.CancelFunc
	wg          sync.WaitGroup
	resolving   map[resolveKey]bool
	resolvedCh  chan resolveKey
	tsoCh       chan stuckSample
	tsoInFlight bool

	stats TransportStats
}

// TransportStats counts transport-level happenings (atomics; read with
// Stats()).
type TransportStats struct {
	StreamsOpened   atomic.Uint64
	StreamFailures  atomic.Uint64
	V1Fallbacks     atomic.Uint64
	RegionRequests  atomic.Uint64
	Deregisters     atomic.Uint64
	RegionRetries   [RetryMatcherQuota + 1]atomic.Uint64
	LockResolutions atomic.Uint64
}

// TransportStatsSnapshot is a copy of TransportStats.
type TransportStatsSnapshot struct {
	StreamsOpened, StreamFailures, V1Fallbacks, RegionRequests, Deregisters, LockResolutions uint64
	RegionRetries                                                                            map[RetryReason]uint64
}

type resolveKey struct {
	sub      *grpcSub
	regionID uint64
}

type storeState struct {
	addr    string
	v1      bool
	retryAt time.Time
}

type streamKey struct {
	addr string
	sub  *grpcSub // nil for a shared V2 stream
}

type grpcSub struct {
	ctx     context.Context
	id      uint64
	reqID   uint64
	span    kvevent.Span
	puller  *SpanPuller
	regions map[uint64]liveRegion
	// delayed are sub-spans in backoff (busy, congested, unknown error):
	// pieces overlapping one are not re-subscribed before its time.
	delayed []delayedRange
}

type delayedRange struct {
	span  kvevent.Span
	until time.Time
}

type liveRegion struct {
	info RegionInfo
	st   *feedStream
}

type feedStream struct {
	key    streamKey
	v1     bool
	ctx    context.Context
	cancel context.CancelFunc
	dead   bool

	sendMu   sync.Mutex
	sendQ    []*cdcpb.ChangeDataRequest
	sendWake chan struct{}

	// regions registered on the stream (Run-owned).
	regions map[resolveKey]bool
}

type streamMsg struct {
	st  *feedStream
	ev  *cdcpb.ChangeDataEvent
	err error
}

// NewGRPCSource returns a source using cfg. Nothing is dialled before Run.
func NewGRPCSource(cfg TransportConfig) (*GRPCSource, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	return &GRPCSource{
		cfg:        cfg,
		wake:       make(chan struct{}, 1),
		events:     make(chan streamMsg, 256),
		conns:      map[string]*grpc.ClientConn{},
		subs:       map[uint64]*grpcSub{},
		stores:     map[string]*storeState{},
		streams:    map[streamKey]*feedStream{},
		resolving:  map[resolveKey]bool{},
		resolvedCh: make(chan resolveKey, 64),
		tsoCh:      make(chan stuckSample, 1),
	}, nil
}

var _ kvevent.Source = (*GRPCSource)(nil)

// Subscribe implements kvevent.Source. Cancelling ctx ends the
// subscription: V2 streams get a Deregister, v1 streams of the span are
// closed (T9).
func (s *GRPCSource) Subscribe(ctx context.Context, subID uint64, span kvevent.Span, startTs uint64, c kvevent.Consumer) error {
	if s.cfg.CheckStartTs != nil {
		if err := s.cfg.CheckStartTs(ctx, startTs); err != nil {
			return fmt.Errorf("logpuller: subscribe %d: %w", subID, err)
		}
	}
	p, err := NewSpanPuller(Config{Span: span, StartTs: startTs, Consumer: c, MatcherQuota: s.cfg.MatcherQuota})
	if err != nil {
		return fmt.Errorf("logpuller: subscribe %d: %w", subID, err)
	}
	s.newMu.Lock()
	s.newSubs = append(s.newSubs, &grpcSub{ctx: ctx, id: subID, span: cloneSpan(span), puller: p, regions: map[uint64]liveRegion{}})
	s.newMu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return nil
}

// Stats returns a copy of the transport counters.
func (s *GRPCSource) Stats() TransportStatsSnapshot {
	out := TransportStatsSnapshot{
		StreamsOpened:   s.stats.StreamsOpened.Load(),
		StreamFailures:  s.stats.StreamFailures.Load(),
		V1Fallbacks:     s.stats.V1Fallbacks.Load(),
		RegionRequests:  s.stats.RegionRequests.Load(),
		Deregisters:     s.stats.Deregisters.Load(),
		LockResolutions: s.stats.LockResolutions.Load(),
		RegionRetries:   map[RetryReason]uint64{},
	}
	for r := range s.stats.RegionRetries {
		if v := s.stats.RegionRetries[r].Load(); v > 0 {
			out.RegionRetries[RetryReason(r)] = v
		}
	}
	return out
}

// Run drives every subscription until ctx ends (nil) or the core reports a
// fatal protocol error (returned). On return every stream is closed and
// every goroutine the source started has ended.
func (s *GRPCSource) Run(ctx context.Context) error {
	s.baseCtx, s.baseCancel = context.WithCancel(ctx)
	defer s.shutdown()
	retry := time.NewTicker(s.cfg.RegionRetryInterval)
	defer retry.Stop()
	var resolveC <-chan time.Time
	if s.cfg.Resolver != nil && s.cfg.Clock != nil {
		t := time.NewTicker(s.cfg.ResolveLockInterval)
		defer t.Stop()
		resolveC = t.C
	}
	for {
		s.adopt()
		s.dropCancelled()
		if s.dirty {
			s.dirty = false
			s.subscribeHoles()
		}
		select {
		case <-ctx.Done():
			return nil
		case m := <-s.events:
			if err := s.handleMsg(m); err != nil {
				return err
			}
			// Drain what is already queued before re-planning.
			for n := 0; n < 64; n++ {
				select {
				case m := <-s.events:
					if err := s.handleMsg(m); err != nil {
						return err
					}
					continue
				default:
				}
				break
			}
		case <-s.wake:
			s.dirty = true
		case <-retry.C:
			if s.pending {
				s.dirty = true
			}
		case k := <-s.resolvedCh:
			delete(s.resolving, k)
		case <-resolveC:
			s.startStuckCheck()
		case sample := <-s.tsoCh:
			s.checkStuck(sample)
		}
	}
}

// Close releases the connections. Run closes its streams itself; Close
// after Run is the normal order, and it is idempotent.
func (s *GRPCSource) Close() error {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	s.closed = true
	var first error
	for addr, c := range s.conns {
		if err := c.Close(); err != nil && first == nil {
			first = fmt.Errorf("logpuller: close connection to %s: %w", addr, err)
		}
		delete(s.conns, addr)
	}
	return first
}

func (s *GRPCSource) shutdown() {
	s.baseCancel()
	for _, st := range s.streams {
		st.cancel()
	}
	// Unblock goroutines reporting into the channels while we wait.
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	for {
		select {
		case <-done:
			return
		case <-s.events:
		case <-s.resolvedCh:
		case <-s.tsoCh:
		}
	}
}

func (s *GRPCSource) adopt() {
	s.newMu.Lock()
	subs := s.newSubs
	s.newSubs = nil
	s.newMu.Unlock()
	for _, sub := range subs {
		s.nextReq++
		sub.reqID = s.nextReq
		s.subs[sub.reqID] = sub
		s.all = append(s.all, sub)
		s.dirty = true
	}
}

// dropCancelled ends subscriptions whose context is done (T9).
func (s *GRPCSource) dropCancelled() {
	keep := s.all[:0]
	for _, sub := range s.all {
		if sub.ctx.Err() == nil {
			keep = append(keep, sub)
			continue
		}
		delete(s.subs, sub.reqID)
		deregistered := map[*feedStream]bool{}
		for id, lr := range sub.regions {
			delete(lr.st.regions, resolveKey{sub, id})
			if lr.st.v1 {
				continue
			}
			if !deregistered[lr.st] {
				deregistered[lr.st] = true
				lr.st.send(&cdcpb.ChangeDataRequest{
					Header:    s.header(),
					RequestId: sub.reqID,
					Request:   &cdcpb.ChangeDataRequest_Deregister_{Deregister: &cdcpb.ChangeDataRequest_Deregister{}},
				})
				s.stats.Deregisters.Add(1)
			}
		}
		sub.regions = nil
		for k, st := range s.streams {
			if k.sub == sub {
				s.closeStream(st)
			}
		}
	}
	for i := len(keep); i < len(s.all); i++ {
		s.all[i] = nil
	}
	s.all = keep
}

func (s *GRPCSource) header() *cdcpb.Header {
	return &cdcpb.Header{ClusterId: s.cfg.ClusterID, TicdcVersion: ClientVersion}
}

// subscribeHoles covers every unheld piece of every span, region by region
// (T3). Pieces that cannot be covered now (locator error, unknown leader, a
// store in reconnect backoff, a span in busy backoff, an overlapping stale
// region) stay holes; s.pending makes the retry tick try again.
func (s *GRPCSource) subscribeHoles() {
	s.pending = false
	now := s.cfg.Now()
	for _, sub := range s.all {
		sub.pruneDelays(now)
		for _, h := range sub.puller.Holes() {
			if !s.subscribeHole(sub, h, now) {
				s.pending = true
			}
		}
	}
}

// subscribeHole subscribes the regions of one hole and reports whether the
// whole hole got covered.
func (s *GRPCSource) subscribeHole(sub *grpcSub, h Hole, now time.Time) bool {
	ctx, cancel := context.WithTimeout(s.baseCtx, s.cfg.DialTimeout)
	regions, err := s.cfg.Locator.LocateSpan(ctx, h.Span)
	cancel()
	if err != nil || len(regions) == 0 {
		return false
	}
	complete := true
	next := h.Span.StartKey
	for _, r := range regions {
		piece, ok := Intersect(kvevent.Span{StartKey: r.StartKey, EndKey: r.EndKey}, h.Span)
		if !ok {
			continue
		}
		if string(piece.StartKey) != string(next) {
			complete = false // a gap in what the locator returned
		}
		next = piece.EndKey
		if sub.isDelayed(piece, now) {
			complete = false
			continue
		}
		if r.LeaderStoreID == 0 || r.LeaderAddr == "" {
			s.cfg.Locator.UpdateLeader(r, nil)
			complete = false
			continue
		}
		store := s.store(r.LeaderAddr)
		if now.Before(store.retryAt) {
			complete = false
			continue
		}
		st := s.streamFor(store, sub)
		reqID := sub.reqID
		if st.v1 {
			// v1: a fresh id per region request (facts §1.1).
			s.nextReq++
			reqID = s.nextReq
		}
		ts, err := sub.puller.AddRegion(r.ID, reqID, piece)
		if err != nil {
			complete = false
			continue
		}
		st.send(&cdcpb.ChangeDataRequest{
			Header:       s.header(),
			RegionId:     r.ID,
			RegionEpoch:  r.Epoch,
			CheckpointTs: ts,
			StartKey:     piece.StartKey,
			EndKey:       piece.EndKey,
			RequestId:    reqID,
			ExtraOp:      kvrpcpb.ExtraOp_ReadOldValue,
			KvApi:        cdcpb.ChangeDataRequest_TiDB,
			Request:      &cdcpb.ChangeDataRequest_Register_{Register: &cdcpb.ChangeDataRequest_Register{}},
		})
		s.stats.RegionRequests.Add(1)
		sub.regions[r.ID] = liveRegion{info: r, st: st}
		st.regions[resolveKey{sub, r.ID}] = true
	}
	if len(next) != 0 && endCompare(next, h.Span.EndKey) < 0 {
		complete = false
	}
	return complete
}

func (s *GRPCSource) store(addr string) *storeState {
	st := s.stores[addr]
	if st == nil {
		st = &storeState{addr: addr, v1: s.cfg.DisableV2}
		s.stores[addr] = st
	}
	return st
}

// streamFor returns the live stream for (store, sub), opening it if needed.
func (s *GRPCSource) streamFor(store *storeState, sub *grpcSub) *feedStream {
	key := streamKey{addr: store.addr}
	if store.v1 {
		key.sub = sub
	}
	if st := s.streams[key]; st != nil {
		return st
	}
	ctx, cancel := context.WithCancel(s.baseCtx)
	st := &feedStream{
		key:      key,
		v1:       store.v1,
		ctx:      ctx,
		cancel:   cancel,
		sendWake: make(chan struct{}, 1),
		regions:  map[resolveKey]bool{},
	}
	s.streams[key] = st
	s.stats.StreamsOpened.Add(1)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.runStream(st)
	}()
	return st
}

func (s *GRPCSource) conn(addr string) (*grpc.ClientConn, error) {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	if s.closed {
		return nil, errors.New("logpuller: source closed")
	}
	if c := s.conns[addr]; c != nil {
		return c, nil
	}
	c, err := grpc.NewClient(addr, dialOptions()...)
	if err != nil {
		return nil, fmt.Errorf("logpuller: dial store %s: %w", addr, err)
	}
	s.conns[addr] = c
	return c, nil
}

// closeStream cancels a stream and forgets it; its goroutines end on their
// own. The regions still registered on it are not failed (the caller does
// that when it wants them back).
func (s *GRPCSource) closeStream(st *feedStream) {
	st.dead = true
	st.cancel()
	if s.streams[st.key] == st {
		delete(s.streams, st.key)
	}
}

func (s *GRPCSource) handleMsg(m streamMsg) error {
	if m.st.dead {
		return nil // leftovers of a stream already given up
	}
	if m.err != nil {
		s.failStream(m.st, m.err)
		return nil
	}
	if rts := m.ev.ResolvedTs; rts != nil {
		s.handleResolved(m.st, rts)
	}
	for _, ev := range m.ev.Events {
		sub := s.route(m.st, ev.RequestId)
		if sub == nil {
			continue // a cancelled subscription's leftovers
		}
		retry, err := sub.puller.HandleEvent(ev)
		if err != nil {
			return fmt.Errorf("logpuller: subscription %d: %w", sub.id, err)
		}
		if retry != nil {
			s.onRetry(sub, retry)
		}
	}
	return nil
}

func (s *GRPCSource) route(st *feedStream, reqID uint64) *grpcSub {
	if st.key.sub != nil {
		if st.key.sub.regions == nil {
			return nil // cancelled
		}
		return st.key.sub
	}
	return s.subs[reqID]
}

// handleResolved routes a batched resolved ts: by request id on V2, to the
// stream's only span on v1; a batch without request id on a shared stream
// goes to every span with a region on it (the core ignores regions it does
// not hold). (T6)
func (s *GRPCSource) handleResolved(st *feedStream, rts *cdcpb.ResolvedTs) {
	if st.key.sub != nil || rts.RequestId != 0 {
		if sub := s.route(st, rts.RequestId); sub != nil {
			sub.puller.HandleResolvedTs(rts)
		}
		return
	}
	seen := map[*grpcSub]bool{}
	for k := range st.regions {
		if !seen[k.sub] {
			seen[k.sub] = true
			k.sub.puller.HandleResolvedTs(rts)
		}
	}
}

// onRetry reacts to a region subscription that ended (T7).
func (s *GRPCSource) onRetry(sub *grpcSub, r *RegionRetry) {
	s.stats.RegionRetries[r.Reason].Add(1)
	lr, ok := sub.regions[r.RegionID]
	if ok {
		delete(sub.regions, r.RegionID)
		delete(lr.st.regions, resolveKey{sub, r.RegionID})
	}
	now := s.cfg.Now()
	switch r.Reason {
	case RetryNotLeader:
		var leader *metapb.Peer
		if r.Err != nil && r.Err.NotLeader != nil && r.Err.NotLeader.Leader != nil && r.Err.NotLeader.Leader.StoreId != 0 {
			leader = r.Err.NotLeader.Leader
		}
		s.cfg.Locator.UpdateLeader(lr.info, leader)
	case RetryEpochNotMatch, RetryRegionNotFound:
		s.cfg.Locator.Invalidate(lr.info)
	case RetryServerIsBusy:
		d := s.cfg.BusyBackoff
		if r.Err != nil && r.Err.ServerIsBusy != nil && r.Err.ServerIsBusy.BackoffMs > 0 {
			d = time.Duration(r.Err.ServerIsBusy.BackoffMs) * time.Millisecond
		}
		sub.backoff(r.Span, now.Add(d))
	case RetryCongested:
		sub.backoff(r.Span, now.Add(s.cfg.BusyBackoff))
	case RetryUnknownError:
		sub.backoff(r.Span, now.Add(s.cfg.RegionRetryInterval))
	case RetryMatcherQuota:
		// TiKV still streams the region: drop it there before asking
		// again, or the new request would be a duplicate.
		if ok {
			if lr.st.v1 {
				s.failStream(lr.st, errors.New("matcher quota exceeded on a v1 stream"))
			} else {
				lr.st.send(&cdcpb.ChangeDataRequest{Header: s.header(), RequestId: sub.reqID, RegionId: r.RegionID,
					Request: &cdcpb.ChangeDataRequest_Deregister_{Deregister: &cdcpb.ChangeDataRequest_Deregister{}}})
				s.stats.Deregisters.Add(1)
			}
		}
		sub.backoff(r.Span, now.Add(s.cfg.BusyBackoff))
	}
	s.dirty = true
}

// backoff keeps span (a failed region's sub-span) out of re-subscription
// until the given time; the rest of the span's holes are not held back.
func (sub *grpcSub) backoff(span kvevent.Span, until time.Time) {
	sub.delayed = append(sub.delayed, delayedRange{span: cloneSpan(span), until: until})
}

func (sub *grpcSub) pruneDelays(now time.Time) {
	keep := sub.delayed[:0]
	for _, d := range sub.delayed {
		if now.Before(d.until) {
			keep = append(keep, d)
		}
	}
	sub.delayed = keep
}

func (sub *grpcSub) isDelayed(piece kvevent.Span, now time.Time) bool {
	for _, d := range sub.delayed {
		if now.Before(d.until) {
			if _, overlap := Intersect(d.span, piece); overlap {
				return true
			}
		}
	}
	return false
}

// failStream gives up a stream: every region on it is failed back to its
// span's holes, its cached region is invalidated, and the store is not
// contacted again before the reconnect backoff. Unimplemented on a V2
// stream instead switches the store to v1 at once (T2, T8).
func (s *GRPCSource) failStream(st *feedStream, err error) {
	s.closeStream(st)
	store := s.store(st.key.addr)
	fallback := !st.v1 && status.Code(err) == codes.Unimplemented
	if fallback {
		store.v1 = true
		s.stats.V1Fallbacks.Add(1)
	} else {
		s.stats.StreamFailures.Add(1)
		store.retryAt = s.cfg.Now().Add(s.cfg.StoreReconnectBackoff)
	}
	for k := range st.regions {
		lr, ok := k.sub.regions[k.regionID]
		if !ok || lr.st != st {
			continue
		}
		delete(k.sub.regions, k.regionID)
		if r := k.sub.puller.FailRegion(k.regionID, RetryStreamFailure, nil); r != nil {
			s.stats.RegionRetries[RetryStreamFailure].Add(1)
		}
		if !fallback {
			s.cfg.Locator.Invalidate(lr.info)
		}
	}
	st.regions = map[resolveKey]bool{}
	s.dirty = true
	s.pending = true
}

// startStuckCheck fetches a TSO in the background (PD may be slow; Run
// must keep handling events) and hands it to Run, which then runs the
// planner (checkStuck). At most one fetch is in flight.
func (s *GRPCSource) startStuckCheck() {
	if s.tsoInFlight {
		return
	}
	s.tsoInFlight = true
	// The wall clock is read before the TSO is fetched, so the TSO is never
	// older than the time the planner judges staleness by (its target is
	// min(TSO, resolved time + 4 s)).
	nowMs := s.cfg.Now().UnixMilli()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(s.baseCtx, s.cfg.DialTimeout)
		cur, err := s.cfg.Clock.CurrentTs(ctx)
		cancel()
		if err != nil {
			cur = 0 // retried on the next tick
		}
		select {
		case s.tsoCh <- stuckSample{nowMs: nowMs, ts: cur}:
		case <-s.baseCtx.Done():
		}
	}()
}

// checkStuck runs the core's stuck-resolved-ts planner for every span with
// the sampled clocks and resolves the locks of the regions it names, in the
// background (T10).
// stuckSample is one stuck-check's clock readings: the wall clock, then
// the TSO.
type stuckSample struct {
	nowMs int64
	ts    uint64
}

func (s *GRPCSource) checkStuck(sample stuckSample) {
	s.tsoInFlight = false
	cur, nowMs := sample.ts, sample.nowMs
	if cur == 0 {
		return
	}
	for _, sub := range s.all {
		for _, task := range sub.puller.StuckRegions(nowMs, cur) {
			k := resolveKey{sub, task.RegionID}
			if s.resolving[k] {
				continue
			}
			s.resolving[k] = true
			s.stats.LockResolutions.Add(1)
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				// An error is retried by the planner after its cool-down.
				_ = s.cfg.Resolver.ResolveLocks(s.baseCtx, task)
				select {
				case s.resolvedCh <- k:
				case <-s.baseCtx.Done():
				}
			}()
		}
	}
}
