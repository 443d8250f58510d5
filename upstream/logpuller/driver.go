package logpuller

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pingcap/kvproto/pkg/cdcpb"
	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	"github.com/pingcap/kvproto/pkg/metapb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/searchfabric/sfemu/upstream/kvevent"
)

// Driver is the one subscription driver of the project: it owns every
// subscribed span's puller core and all the bookkeeping around them —
// request ids, which region of which span is registered on which stream,
// region assignment of the cores' holes, reactions to region errors and
// stream failures (retry, backoff, locator updates), routing of events and
// the fan-out of batched resolved ts, and the stuck-resolved-ts tasks.
//
// It does no I/O of its own: a transport opens streams for it (Dialer),
// finds regions (RegionLocator) and hands every received message back
// (HandleEvent, FailStream). The gRPC EventFeed client (GRPCSource) and the
// fake upstream's in-process feed (fakeupstream.Source) are the two
// transports. Rules: specs/logpuller.md (T1-T11).
//
// A Driver is not safe for concurrent use, except Subscribe: the transport
// calls everything else from one goroutine (its Run or Pump), which is
// also where the consumers are called.
type Driver struct {
	cfg DriverConfig

	newMu   sync.Mutex
	newSubs []*driverSub

	subs      map[uint64]*driverSub // by request id (V2 routing)
	all       []*driverSub          // subscription order (deterministic planning)
	stores    map[string]*storeState
	streams   map[streamKey]*Stream
	resolving map[resolveKey]bool
	nextReq   uint64
	dirty     bool // holes may be coverable now: plan again
	pending   bool // the last plan left holes uncovered: retry on a tick

	stats TransportStats
}

// DriverConfig configures a Driver. Durations are used as given (zero: no
// wait); the gRPC transport fills TiCDC's defaults (TransportConfig).
type DriverConfig struct {
	// Name prefixes the errors (the transport's package).
	Name string
	// ClusterID is sent in every request header (T3).
	ClusterID uint64
	Locator   RegionLocator
	Dialer    Dialer
	// Now is the clock backoff deadlines are measured on.
	Now func() time.Time
	// LocateTimeout bounds one LocateSpan call (0: only the caller's ctx).
	LocateTimeout time.Duration
	// StoreReconnectBackoff: a store whose stream failed is not contacted
	// again before it has passed (T8).
	StoreReconnectBackoff time.Duration
	// RegionRetryInterval: the wait after an empty or unknown region error.
	RegionRetryInterval time.Duration
	// BusyBackoff: the wait after server_is_busy without backoff_ms, after
	// congested and after the matcher quota.
	BusyBackoff time.Duration
	// NoBackoff retries every failed region and store on the next plan,
	// whatever the error asks (server_is_busy's backoff_ms included): for
	// an in-process feed whose pump rounds are the only retry tick.
	NoBackoff bool
	// MatcherQuota per span (0: DefaultMatcherQuota).
	MatcherQuota int
	// Matcher is every span's shared memory quota and prewrite spill
	// store (LP13-LP16).
	Matcher MatcherMemory
	// DisableV2 opens every stream as v1 EventFeed.
	DisableV2 bool
	// WholeRegions subscribes a region over all of its part of the span at
	// once, or not at all while a region whose error has not arrived yet
	// still holds some of it. Only for a locator that is never stale (the
	// fake's in-process topology): after a merge the new region is then
	// never registered for half its range, which the core could not extend
	// later. A cached locator (PD through client-go) must clip to the hole
	// instead: a stale cached region overlapping a live one is sent, fails
	// with epoch_not_match and invalidates the cache entry (T4, T7).
	WholeRegions bool
}

// Dialer opens change-data streams: it is the transport below the driver.
type Dialer interface {
	// Open starts a stream to st's store (st.Addr, st.StoreID; EventFeed v1
	// when st.V1). Whatever the stream then receives, and its failure, the
	// transport hands back to HandleEvent / FailStream with st. An error
	// means the stream could not be started now (the pieces stay holes).
	Open(st *Stream) (StreamConn, error)
}

// StreamConn is an open stream as the driver uses it.
type StreamConn interface {
	// Send sends or queues a request. An error means the stream is broken
	// (the driver fails it); a transport that sends in the background
	// reports failures through FailStream instead.
	Send(req *cdcpb.ChangeDataRequest) error
	// Close ends the stream from the client side (TiKV then drops every
	// registration on it). Called once, by the driver.
	Close()
}

// Stream is one change-data stream the driver opened. Its exported fields
// are fixed at creation and may be read by the transport's goroutines.
type Stream struct {
	Addr    string
	StoreID uint64
	V1      bool

	key     streamKey
	conn    StreamConn
	dead    bool
	regions map[resolveKey]bool // registrations on the stream
}

// Dead reports whether the driver gave the stream up: messages still
// arriving from it are leftovers.
func (st *Stream) Dead() bool { return st.dead }

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
	sub      *driverSub
	regionID uint64
}

type storeState struct {
	addr    string
	storeID uint64
	v1      bool
	retryAt time.Time
}

type streamKey struct {
	addr string
	sub  *driverSub // nil for a shared V2 stream
}

type driverSub struct {
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
	st   *Stream
}

// NewDriver returns a driver using cfg.
func NewDriver(cfg DriverConfig) (*Driver, error) {
	if cfg.Locator == nil {
		return nil, fmt.Errorf("%s: driver config: Locator is required", cfg.Name)
	}
	if cfg.Dialer == nil {
		return nil, fmt.Errorf("%s: driver config: Dialer is required", cfg.Name)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Driver{
		cfg:       cfg,
		subs:      map[uint64]*driverSub{},
		stores:    map[string]*storeState{},
		streams:   map[streamKey]*Stream{},
		resolving: map[resolveKey]bool{},
	}, nil
}

// Subscribe creates the span's core and queues the subscription for the
// driver's goroutine (Adopt). It is safe to call from any goroutine,
// including a consumer called by the driver.
func (d *Driver) Subscribe(ctx context.Context, subID uint64, span kvevent.Span, startTs uint64, c kvevent.Consumer) error {
	p, err := NewSpanPuller(Config{Span: span, StartTs: startTs, Consumer: c, MatcherQuota: d.cfg.MatcherQuota, Matcher: d.cfg.Matcher})
	if err != nil {
		return fmt.Errorf("%s: subscribe %d: %w", d.cfg.Name, subID, err)
	}
	d.newMu.Lock()
	d.newSubs = append(d.newSubs, &driverSub{ctx: ctx, id: subID, span: cloneSpan(span), puller: p, regions: map[uint64]liveRegion{}})
	d.newMu.Unlock()
	return nil
}

// Adopt takes the queued subscriptions over, each with a fresh request id.
func (d *Driver) Adopt() {
	d.newMu.Lock()
	subs := d.newSubs
	d.newSubs = nil
	d.newMu.Unlock()
	for _, sub := range subs {
		d.nextReq++
		sub.reqID = d.nextReq
		d.subs[sub.reqID] = sub
		d.all = append(d.all, sub)
		d.dirty = true
	}
}

// MarkDirty asks for a new plan on the next SubscribeHoles check.
func (d *Driver) MarkDirty() { d.dirty = true }

// Dirty reports whether holes may be coverable now (a subscription was
// added, a region or stream failed).
func (d *Driver) Dirty() bool { return d.dirty }

// Pending reports whether the last plan left holes uncovered (retried on
// the transport's RegionRetryInterval tick, T4).
func (d *Driver) Pending() bool { return d.pending }

// Stats returns a copy of the transport counters.
func (d *Driver) Stats() TransportStatsSnapshot {
	out := TransportStatsSnapshot{
		StreamsOpened:   d.stats.StreamsOpened.Load(),
		StreamFailures:  d.stats.StreamFailures.Load(),
		V1Fallbacks:     d.stats.V1Fallbacks.Load(),
		RegionRequests:  d.stats.RegionRequests.Load(),
		Deregisters:     d.stats.Deregisters.Load(),
		LockResolutions: d.stats.LockResolutions.Load(),
		RegionRetries:   map[RetryReason]uint64{},
	}
	for r := range d.stats.RegionRetries {
		if v := d.stats.RegionRetries[r].Load(); v > 0 {
			out.RegionRetries[RetryReason(r)] = v
		}
	}
	return out
}

// SpanStats returns the core counters of subscription subID.
func (d *Driver) SpanStats(subID uint64) (Stats, bool) {
	for _, sub := range d.all {
		if sub.id == subID {
			return sub.puller.Stats(), true
		}
	}
	return Stats{}, false
}

// CloseStreams closes every stream (the transport is shutting down).
func (d *Driver) CloseStreams() {
	for _, st := range d.streams {
		d.closeStream(st)
	}
	// What the matchers hold goes back to the shared quotas, which
	// outlive this source (LP16).
	for _, sub := range d.all {
		sub.puller.Release()
	}
}

// DropCancelled ends subscriptions whose context is done (T9): on V2
// streams a Deregister with the span's request id, v1 streams of the span
// are closed.
func (d *Driver) DropCancelled() {
	keep := d.all[:0]
	for _, sub := range d.all {
		if sub.ctx.Err() == nil {
			keep = append(keep, sub)
			continue
		}
		delete(d.subs, sub.reqID)
		sub.puller.Release()
		deregistered := map[*Stream]bool{}
		for id, lr := range sub.regions {
			delete(lr.st.regions, resolveKey{sub, id})
			if lr.st.V1 || deregistered[lr.st] {
				continue
			}
			deregistered[lr.st] = true
			_ = lr.st.conn.Send(&cdcpb.ChangeDataRequest{
				Header:    d.header(),
				RequestId: sub.reqID,
				Request:   &cdcpb.ChangeDataRequest_Deregister_{Deregister: &cdcpb.ChangeDataRequest_Deregister{}},
			})
			d.stats.Deregisters.Add(1)
		}
		sub.regions = nil
		for k, st := range d.streams {
			if k.sub == sub {
				d.closeStream(st)
			}
		}
	}
	for i := len(keep); i < len(d.all); i++ {
		d.all[i] = nil
	}
	d.all = keep
}

func (d *Driver) header() *cdcpb.Header {
	return &cdcpb.Header{ClusterId: d.cfg.ClusterID, TicdcVersion: ClientVersion}
}

// SubscribeHoles covers every unheld piece of every span, region by region
// (T3, T4). Pieces that cannot be covered now (locator error, unknown
// leader, a store in reconnect backoff or refusing a stream, a span in busy
// backoff, an overlapping stale region) stay holes; Pending then reports
// them for the retry tick.
func (d *Driver) SubscribeHoles(ctx context.Context) {
	d.dirty = false
	d.pending = false
	now := d.cfg.Now()
	for _, sub := range d.all {
		sub.pruneDelays(now)
		for _, h := range sub.puller.Holes() {
			if !d.subscribeHole(ctx, sub, h, now) {
				d.pending = true
			}
		}
	}
}

// subscribeHole subscribes the regions of one hole and reports whether the
// whole hole got covered.
func (d *Driver) subscribeHole(ctx context.Context, sub *driverSub, h Hole, now time.Time) bool {
	if d.cfg.LocateTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.cfg.LocateTimeout)
		defer cancel()
	}
	regions, err := d.cfg.Locator.LocateSpan(ctx, h.Span)
	if err != nil || len(regions) == 0 {
		return false
	}
	complete := true
	next := h.Span.StartKey
	for _, r := range regions {
		rspan := kvevent.Span{StartKey: r.StartKey, EndKey: r.EndKey}
		piece, ok := Intersect(rspan, h.Span)
		if !ok {
			continue
		}
		if string(piece.StartKey) != string(next) {
			complete = false // a gap in what the locator returned
		}
		next = piece.EndKey
		if d.cfg.WholeRegions {
			piece, _ = Intersect(rspan, sub.span)
		}
		if sub.isDelayed(piece, now) {
			complete = false
			continue
		}
		if r.LeaderStoreID == 0 || r.LeaderAddr == "" {
			d.cfg.Locator.UpdateLeader(r, nil)
			complete = false
			continue
		}
		store := d.store(r.LeaderAddr, r.LeaderStoreID)
		if now.Before(store.retryAt) {
			complete = false
			continue
		}
		st, err := d.streamFor(store, sub)
		if err != nil {
			complete = false
			continue
		}
		reqID := sub.reqID
		if st.V1 {
			// v1: a fresh id per region request (facts §1.1).
			d.nextReq++
			reqID = d.nextReq
		}
		ts, err := sub.puller.AddRegion(r.ID, reqID, piece)
		if err != nil {
			complete = false // held by a region whose error has not arrived
			continue
		}
		sub.regions[r.ID] = liveRegion{info: r, st: st}
		st.regions[resolveKey{sub, r.ID}] = true
		d.stats.RegionRequests.Add(1)
		err = st.conn.Send(&cdcpb.ChangeDataRequest{
			Header:       d.header(),
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
		if err != nil {
			d.FailStream(st, err)
			complete = false
		}
	}
	if len(next) != 0 && endCompare(next, h.Span.EndKey) < 0 {
		complete = false
	}
	return complete
}

func (d *Driver) store(addr string, storeID uint64) *storeState {
	st := d.stores[addr]
	if st == nil {
		st = &storeState{addr: addr, storeID: storeID, v1: d.cfg.DisableV2}
		d.stores[addr] = st
	}
	return st
}

// streamFor returns the live stream for (store, sub), opening it if needed:
// one per store on V2, one per (span, store) on v1 (T1, T2).
func (d *Driver) streamFor(store *storeState, sub *driverSub) (*Stream, error) {
	key := streamKey{addr: store.addr}
	if store.v1 {
		key.sub = sub
	}
	if st := d.streams[key]; st != nil {
		return st, nil
	}
	st := &Stream{Addr: store.addr, StoreID: store.storeID, V1: store.v1, key: key, regions: map[resolveKey]bool{}}
	conn, err := d.cfg.Dialer.Open(st)
	if err != nil {
		return nil, err
	}
	st.conn = conn
	d.streams[key] = st
	d.stats.StreamsOpened.Add(1)
	return st, nil
}

// closeStream closes a stream and forgets it. The regions still registered
// on it are not failed (the caller does that when it wants them back).
func (d *Driver) closeStream(st *Stream) {
	if st.dead {
		return
	}
	st.dead = true
	st.conn.Close()
	if d.streams[st.key] == st {
		delete(d.streams, st.key)
	}
}

// HandleEvent hands one received message of st to the cores it concerns
// and reacts to the regions it ended. It returns an error (naming the
// subscription) when a core reports a fatal protocol violation (T11).
func (d *Driver) HandleEvent(st *Stream, ev *cdcpb.ChangeDataEvent) error {
	if st.dead {
		return nil // leftovers of a stream already given up
	}
	if rts := ev.ResolvedTs; rts != nil {
		d.handleResolved(st, rts)
	}
	for _, e := range ev.Events {
		sub := d.route(st, e.RequestId)
		if sub == nil {
			continue // a cancelled subscription's leftovers
		}
		retry, err := sub.puller.HandleEvent(e)
		if err != nil {
			return fmt.Errorf("%s: subscription %d: %w", d.cfg.Name, sub.id, err)
		}
		if retry != nil {
			d.onRetry(sub, retry)
		}
	}
	return nil
}

func (d *Driver) route(st *Stream, reqID uint64) *driverSub {
	if st.key.sub != nil {
		if st.key.sub.regions == nil {
			return nil // cancelled
		}
		return st.key.sub
	}
	return d.subs[reqID]
}

// handleResolved routes a batched resolved ts: by request id on V2, to the
// stream's only span on v1; a batch without request id on a shared stream
// goes to every span with a region on it (the core ignores regions it does
// not hold). (T6)
func (d *Driver) handleResolved(st *Stream, rts *cdcpb.ResolvedTs) {
	if st.key.sub != nil || rts.RequestId != 0 {
		if sub := d.route(st, rts.RequestId); sub != nil {
			sub.puller.HandleResolvedTs(rts)
		}
		return
	}
	seen := map[*driverSub]bool{}
	for k := range st.regions {
		if !seen[k.sub] {
			seen[k.sub] = true
			k.sub.puller.HandleResolvedTs(rts)
		}
	}
}

// onRetry reacts to a region subscription that ended (T7).
func (d *Driver) onRetry(sub *driverSub, r *RegionRetry) {
	d.stats.RegionRetries[r.Reason].Add(1)
	lr, ok := sub.regions[r.RegionID]
	if ok {
		delete(sub.regions, r.RegionID)
		delete(lr.st.regions, resolveKey{sub, r.RegionID})
	}
	now := d.cfg.Now()
	switch r.Reason {
	case RetryNotLeader:
		var leader *metapb.Peer
		if r.Err != nil && r.Err.NotLeader != nil && r.Err.NotLeader.Leader != nil && r.Err.NotLeader.Leader.StoreId != 0 {
			leader = r.Err.NotLeader.Leader
		}
		d.cfg.Locator.UpdateLeader(lr.info, leader)
	case RetryEpochNotMatch, RetryRegionNotFound:
		d.cfg.Locator.Invalidate(lr.info)
	case RetryServerIsBusy:
		wait := d.cfg.BusyBackoff
		if r.Err != nil && r.Err.ServerIsBusy != nil && r.Err.ServerIsBusy.BackoffMs > 0 {
			wait = time.Duration(r.Err.ServerIsBusy.BackoffMs) * time.Millisecond
		}
		d.backoff(sub, r.Span, now.Add(wait))
	case RetryCongested:
		d.backoff(sub, r.Span, now.Add(d.cfg.BusyBackoff))
	case RetryUnknownError:
		d.backoff(sub, r.Span, now.Add(d.cfg.RegionRetryInterval))
	case RetryMatcherQuota:
		// TiKV still streams the region: drop it there before asking
		// again, or the new request would be a duplicate (T9).
		if ok {
			if lr.st.V1 {
				d.FailStream(lr.st, fmt.Errorf("matcher quota exceeded on a v1 stream"))
			} else {
				_ = lr.st.conn.Send(&cdcpb.ChangeDataRequest{Header: d.header(), RequestId: sub.reqID, RegionId: r.RegionID,
					Request: &cdcpb.ChangeDataRequest_Deregister_{Deregister: &cdcpb.ChangeDataRequest_Deregister{}}})
				d.stats.Deregisters.Add(1)
			}
		}
		d.backoff(sub, r.Span, now.Add(d.cfg.BusyBackoff))
	}
	d.dirty = true
}

// backoff keeps span (a failed region's sub-span) out of re-subscription
// until the given time; the rest of the span's holes are not held back.
func (d *Driver) backoff(sub *driverSub, span kvevent.Span, until time.Time) {
	if d.cfg.NoBackoff {
		return
	}
	sub.delayed = append(sub.delayed, delayedRange{span: cloneSpan(span), until: until})
}

func (sub *driverSub) pruneDelays(now time.Time) {
	keep := sub.delayed[:0]
	for _, d := range sub.delayed {
		if now.Before(d.until) {
			keep = append(keep, d)
		}
	}
	sub.delayed = keep
}

func (sub *driverSub) isDelayed(piece kvevent.Span, now time.Time) bool {
	for _, d := range sub.delayed {
		if now.Before(d.until) {
			if _, overlap := Intersect(d.span, piece); overlap {
				return true
			}
		}
	}
	return false
}

// FailStream gives up a stream: every region on it is failed back to its
// span's holes, its cached region is invalidated, and the store is not
// contacted again before the reconnect backoff. Unimplemented on a V2
// stream instead switches the store to v1 at once (T2, T8).
func (d *Driver) FailStream(st *Stream, err error) {
	d.closeStream(st)
	store := d.store(st.Addr, st.StoreID)
	fallback := !st.V1 && status.Code(err) == codes.Unimplemented
	if fallback {
		store.v1 = true
		d.stats.V1Fallbacks.Add(1)
	} else {
		d.stats.StreamFailures.Add(1)
		if !d.cfg.NoBackoff {
			store.retryAt = d.cfg.Now().Add(d.cfg.StoreReconnectBackoff)
		}
	}
	for k := range st.regions {
		lr, ok := k.sub.regions[k.regionID]
		if !ok || lr.st != st {
			continue
		}
		delete(k.sub.regions, k.regionID)
		if r := k.sub.puller.FailRegion(k.regionID, RetryStreamFailure, nil); r != nil {
			d.stats.RegionRetries[RetryStreamFailure].Add(1)
		}
		if !fallback {
			d.cfg.Locator.Invalidate(lr.info)
		}
	}
	st.regions = map[resolveKey]bool{}
	d.dirty = true
	d.pending = true
}

// StuckTask is one lock-resolution task of the stuck-resolved-ts check.
type StuckTask struct {
	LockResolveTask
	key resolveKey
}

// StuckTasks runs every core's stuck-resolved-ts planner with the sampled
// wall clock and TSO (T10) and returns the tasks to run, at most one in
// flight per region: a task stays in flight until ResolveDone.
func (d *Driver) StuckTasks(nowMs int64, currentTs uint64) []StuckTask {
	var out []StuckTask
	for _, sub := range d.all {
		for _, task := range sub.puller.StuckRegions(nowMs, currentTs) {
			k := resolveKey{sub, task.RegionID}
			if d.resolving[k] {
				continue
			}
			d.resolving[k] = true
			d.stats.LockResolutions.Add(1)
			out = append(out, StuckTask{LockResolveTask: task, key: k})
		}
	}
	return out
}

// ResolveDone ends a task StuckTasks returned (whatever its outcome: an
// error is retried by the planner after its cool-down).
func (d *Driver) ResolveDone(t StuckTask) { delete(d.resolving, t.key) }
