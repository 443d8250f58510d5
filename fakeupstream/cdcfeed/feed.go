// Package cdcfeed is the fake TiKV's change-data service: per-store streams
// that accept kvproto ChangeDataRequests and answer with cdcpb events the
// way TiKV's EventFeed does. Registering a region runs an incremental scan
// (PREWRITE rows for existing locks, COMMITTED rows with commit_ts above
// the checkpoint, then INITIALIZED); afterwards live PREWRITE / COMMIT /
// ROLLBACK rows and COMMITTED rows of 1PC transactions follow, and a
// resolved ts min(TSO, min lock start_ts) per initialized region on every
// tick. Topology changes end subscriptions with region errors, a store
// going down breaks its streams.
//
// Delivery is a scheduler the caller steps: each Step moves one batch of
// one ready subscription into its stream, chosen by a seeded random source,
// so regions interleave out of commit_ts order yet every run with the same
// seed produces the same bytes. Per subscription, order is always kept.
//
// Locking: Stream methods lock the Locker given to New; every Feed method
// expects the caller (the cluster) to hold it already.
package cdcfeed

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"sync"

	"github.com/pingcap/kvproto/pkg/cdcpb"
	"github.com/pingcap/kvproto/pkg/errorpb"
	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	"github.com/pingcap/kvproto/pkg/metapb"

	"github.com/searchfabric/sfemu/fakeupstream/mvcc"
	"github.com/searchfabric/sfemu/fakeupstream/topology"
	"github.com/searchfabric/sfemu/fakeupstream/tso"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
)

// Config tunes the feed. Zero fields take the defaults.
type Config struct {
	// Seed drives the delivery scheduler.
	Seed int64
	// ResolvedTsIntervalMs is the virtual time between resolved-ts rounds
	// (TiKV's cdc.min-ts-interval; default 1000).
	ResolvedTsIntervalMs int64
	// MaxBatchRows caps the rows of one delivered Entries event (default 8)
	// while a subscription has at most 8*MaxBatchRows items queued; a longer
	// queue (a bulk transaction) is delivered in events of up to
	// min(queue/8, MaxBulkBatchRows) rows.
	MaxBatchRows int
	// MaxBulkBatchRows caps live events cut from a long queue (default 256).
	MaxBulkBatchRows int
	// ScanBatchRows is the incremental-scan rows per delivery of a small
	// scan (default 4); a scan of more than 32*ScanBatchRows rows is cut
	// into chunks of scan/32 rows, at most MaxScanBatchRows (default 1024).
	ScanBatchRows int
	// MaxScanBatchRows caps the chunk of a large incremental scan.
	MaxScanBatchRows int
	// HistoryRows is how many delivered rows each subscription remembers
	// for DuplicateWindow (default 256).
	HistoryRows int
}

func (c *Config) fill() {
	if c.ResolvedTsIntervalMs <= 0 {
		c.ResolvedTsIntervalMs = 1000
	}
	if c.MaxBatchRows <= 0 {
		c.MaxBatchRows = 8
	}
	if c.MaxBulkBatchRows < c.MaxBatchRows {
		c.MaxBulkBatchRows = max(256, c.MaxBatchRows)
	}
	if c.ScanBatchRows <= 0 {
		c.ScanBatchRows = 4
	}
	if c.MaxScanBatchRows < c.ScanBatchRows {
		c.MaxScanBatchRows = max(1024, c.ScanBatchRows)
	}
	if c.HistoryRows <= 0 {
		c.HistoryRows = 256
	}
}

// Backend is the cluster state the feed reads.
type Backend struct {
	Store  *mvcc.Store
	Topo   *topology.Topology
	Oracle *tso.Oracle
	Clock  tso.Clock
}

// ErrStoreDown is matched by the error of a stream whose store went down.
var ErrStoreDown = errors.New("store is down")

// ErrStreamDropped is matched by the error of a stream broken by a fault
// hook (the network dropped it).
var ErrStreamDropped = errors.New("stream dropped")

// Tap observes every message put on a stream (for event logs in tests).
type Tap func(storeID, streamID uint64, ev *cdcpb.ChangeDataEvent)

// Feed is the change-data service of the whole fake cluster.
type Feed struct {
	mu         sync.Locker
	b          Backend
	cfg        Config
	rng        *rand.Rand
	streams    []*Stream
	nextStream uint64
	byRegion   map[uint64][]*downstream
	lastTickMs int64
	maxIssued  uint64
	issued     map[issuedKey]*issuedMark // greatest resolved ts issued per region range
	holds      map[uint64]int64
	tap        Tap
	scratch    []byte
	ready      []*downstream
}

// New builds a feed over b. mu is the lock the cluster holds around every
// Feed call; Stream methods take it themselves.
func New(mu sync.Locker, b Backend, cfg Config) *Feed {
	cfg.fill()
	return &Feed{
		mu:         mu,
		b:          b,
		cfg:        cfg,
		rng:        rand.New(rand.NewSource(cfg.Seed)),
		byRegion:   map[uint64][]*downstream{},
		holds:      map[uint64]int64{},
		issued:     map[issuedKey]*issuedMark{},
		lastTickMs: b.Clock.NowMs(),
	}
}

// SetTap installs a message observer (nil removes it).
func (f *Feed) SetTap(t Tap) { f.tap = t }

// MaxIssuedResolvedTs is the greatest resolved ts handed to any
// subscription. A commit at or below it would break the resolved-ts
// promise, so the cluster refuses such commits.
func (f *Feed) MaxIssuedResolvedTs() uint64 { return f.maxIssued }

// IssuedAtOrAbove reports the greatest resolved ts at or above ts that was
// issued for a region range holding comparable key k (0, false if none).
// A commit of k at ts would then be invisible to clients that already
// trust that resolved ts.
func (f *Feed) IssuedAtOrAbove(k []byte, ts uint64) (uint64, bool) {
	if ts > f.maxIssued {
		return 0, false
	}
	best, found := uint64(0), false
	for _, w := range f.issued {
		if w.ts >= ts && w.ts > best && inRange(k, w.start, w.end) {
			best, found = w.ts, true
		}
	}
	return best, found
}

// issuedKey names one region range: the id and its version (a split or
// merge bumps the version, so the range under one key never changes).
type issuedKey struct {
	regionID, version uint64
}

type issuedMark struct {
	start, end []byte
	ts         uint64
}

// item is one queued delivery of a subscription.
type item struct {
	row      *cdcpb.Event_Row
	resolved uint64
	err      *cdcpb.Error
}

type downstream struct {
	s          *Stream
	reqID      uint64
	regionID   uint64
	cmpStart   []byte // observed range, comparable
	cmpEnd     []byte
	regRawS    []byte // whole region range, raw (resolver scope)
	regRawE    []byte
	regCmpS    []byte // whole region range, comparable
	regCmpE    []byte
	regVersion uint64
	oldValue   bool
	scan       []*cdcpb.Event_Row
	scanChunk  int // rows per scan delivery
	initSent   bool
	queue      []item
	closed     bool // no more live rows; queue drains then it is removed
	lastQueued uint64
	lastSent   uint64
	history    []*cdcpb.Event_Row
}

// Stream is one client connection to one store (EventFeed / EventFeedV2).
type Stream struct {
	f       *Feed
	id      uint64
	storeID uint64
	dss     []*downstream
	recv    []*cdcpb.ChangeDataEvent
	err     error
}

// Open opens a stream to store. It fails when the store is unknown or down.
func (f *Feed) Open(storeID uint64) (*Stream, error) {
	st, ok := f.b.Topo.Store(storeID)
	if !ok {
		return nil, fmt.Errorf("cdcfeed: store %d not found", storeID)
	}
	if !st.Up {
		return nil, fmt.Errorf("cdcfeed: open stream to store %d: %w", storeID, ErrStoreDown)
	}
	f.nextStream++
	s := &Stream{f: f, id: f.nextStream, storeID: storeID}
	f.streams = append(f.streams, s)
	return s, nil
}

// ID is the stream's id (creation order).
func (s *Stream) ID() uint64 { return s.id }

// StoreID is the store the stream talks to.
func (s *Stream) StoreID() uint64 { return s.storeID }

// Send handles one request: Register (or an unset request) subscribes a
// region, Deregister removes the request id's subscriptions (one region,
// or all when region_id is 0). Answers, including region errors, arrive
// through Recv. Send fails only when the stream is broken.
func (s *Stream) Send(req *cdcpb.ChangeDataRequest) error {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if _, ok := req.Request.(*cdcpb.ChangeDataRequest_Deregister_); ok {
		s.deregister(req.RequestId, req.RegionId)
		return nil
	}
	s.f.register(s, req)
	return nil
}

// Recv takes every message delivered to the stream so far (nil when none).
// A broken stream returns its error once its buffer is empty.
func (s *Stream) Recv() ([]*cdcpb.ChangeDataEvent, error) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if len(s.recv) == 0 {
		return nil, s.err
	}
	out := s.recv
	s.recv = nil
	return out, nil
}

// Err is the stream's terminal error, if broken.
func (s *Stream) Err() error {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	return s.err
}

// Close ends the stream from the client side; TiKV then deregisters all of
// its subscriptions.
func (s *Stream) Close() {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	s.f.breakStream(s, fmt.Errorf("cdcfeed: stream %d closed by client", s.id), false)
}

func (s *Stream) deregister(reqID, regionID uint64) {
	for _, d := range s.dss {
		if d.reqID == reqID && (regionID == 0 || d.regionID == regionID) {
			s.f.detach(d)
		}
	}
	s.compact()
}

// compact drops closed subscriptions with nothing left to deliver.
func (s *Stream) compact() {
	keep := s.dss[:0]
	for _, d := range s.dss {
		if !d.closed || len(d.queue) > 0 {
			keep = append(keep, d)
		}
	}
	for i := len(keep); i < len(s.dss); i++ {
		s.dss[i] = nil
	}
	s.dss = keep
}

// detach stops live rows to d; queued items are dropped too.
func (f *Feed) detach(d *downstream) {
	d.closed = true
	d.queue = nil
	d.scan = nil
	f.unindex(d)
}

func (f *Feed) unindex(d *downstream) {
	list := f.byRegion[d.regionID]
	for i, x := range list {
		if x == d {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(f.byRegion, d.regionID)
	} else {
		f.byRegion[d.regionID] = list
	}
}

// fail queues a region error after d's pending items and stops live rows,
// as TiKV does when it drops a downstream.
func (f *Feed) fail(d *downstream, e *cdcpb.Error) {
	if d.closed {
		return
	}
	d.closed = true
	d.scan = nil
	d.queue = append(d.queue, item{err: e})
	f.unindex(d)
}

func (f *Feed) register(s *Stream, req *cdcpb.ChangeDataRequest) {
	reject := func(e *cdcpb.Error) {
		s.dss = append(s.dss, &downstream{s: s, reqID: req.RequestId, regionID: req.RegionId, closed: true, initSent: true,
			queue: []item{{err: e}}})
	}
	r, ok := f.b.Topo.Region(req.RegionId)
	if !ok {
		reject(&cdcpb.Error{RegionNotFound: &errorpb.RegionNotFound{RegionId: req.RegionId}})
		return
	}
	if r.Leader != s.storeID {
		ne := &errorpb.NotLeader{RegionId: r.ID}
		if r.Leader != 0 {
			lp := r.LeaderPeer()
			ne.Leader = &metapb.Peer{Id: lp.ID, StoreId: lp.StoreID}
		}
		reject(&cdcpb.Error{NotLeader: ne})
		return
	}
	if ep := req.RegionEpoch; ep == nil || ep.Version != r.Version || ep.ConfVer != r.ConfVer {
		reject(&cdcpb.Error{EpochNotMatch: &errorpb.EpochNotMatch{CurrentRegions: []*metapb.Region{r.Meta()}}})
		return
	}
	for _, d := range s.dss {
		if !d.closed && d.regionID == r.ID && d.reqID == req.RequestId {
			reject(&cdcpb.Error{DuplicateRequest: &cdcpb.DuplicateRequest{RegionId: r.ID}})
			return
		}
	}
	cs, ce, ok := intersect(r.StartKey, r.EndKey, req.StartKey, req.EndKey)
	if !ok {
		// TiKV falls back to the whole region when the range is unusable.
		cs, ce = r.StartKey, r.EndKey
	}
	regS, err3 := rawBound(r.StartKey)
	regE, err4 := rawBound(r.EndKey)
	rs, err1 := rawBound(cs)
	re, err2 := rawBound(ce)
	if err1 != nil || err2 != nil {
		// Like TiKV: keys that do not decode observe the whole region.
		cs, ce, rs, re = r.StartKey, r.EndKey, regS, regE
	}
	if err := errors.Join(err3, err4); err != nil {
		// Only decodable boundaries are produced by the cluster; anything
		// else is a bug in the caller, reported as an unknown region error.
		reject(&cdcpb.Error{})
		return
	}
	d := &downstream{
		s: s, reqID: req.RequestId, regionID: r.ID,
		cmpStart: cs, cmpEnd: ce, regRawS: regS, regRawE: regE,
		regCmpS: r.StartKey, regCmpE: r.EndKey, regVersion: r.Version,
		oldValue: req.ExtraOp == kvrpcpb.ExtraOp_ReadOldValue,
	}
	d.scan = f.incrementalScan(d, rs, re, req.CheckpointTs)
	d.scanChunk = min(max(f.cfg.ScanBatchRows, len(d.scan)/scanChunks), f.cfg.MaxScanBatchRows)
	s.dss = append(s.dss, d)
	f.byRegion[r.ID] = append(f.byRegion[r.ID], d)
}

// incrementalScan snapshots the observed range: PREWRITE rows for locks
// and COMMITTED rows (with old values) for commits above checkpoint, in key
// order, as TiKV's initializer does. Both scans come in key order, so they
// are merged (a key's committed versions before its lock); rows are carved
// out of slabs instead of being allocated one by one.
func (f *Feed) incrementalScan(d *downstream, rs, re []byte, checkpoint uint64) []*cdcpb.Event_Row {
	vs := f.b.Store.ScanVersions(rs, re, checkpoint, math.MaxUint64)
	ls := f.b.Store.ScanLocks(rs, re, math.MaxUint64, 0)
	locks := ls[:0]
	for _, l := range ls {
		if l.Op != mvcc.OpLock {
			locks = append(locks, l)
		}
	}
	n := len(vs) + len(locks)
	if n == 0 {
		return nil
	}
	rows := make([]*cdcpb.Event_Row, 0, n)
	var slab []cdcpb.Event_Row
	next := func() *cdcpb.Event_Row {
		if len(slab) == 0 {
			slab = make([]cdcpb.Event_Row, min(n-len(rows), scanSlabRows))
		}
		r := &slab[0]
		slab = slab[1:]
		return r
	}
	i, j := 0, 0
	for i < len(vs) || j < len(locks) {
		if j < len(locks) && (i == len(vs) || string(locks[j].Key) < string(vs[i].Key)) {
			l := &locks[j]
			j++
			row := next()
			*row = cdcpb.Event_Row{StartTs: l.StartTs, Type: cdcpb.Event_PREWRITE, OpType: opType(l.Op), Key: l.Key, Value: l.Value}
			if d.oldValue {
				row.OldValue = f.b.Store.LatestValue(l.Key)
			}
			rows = append(rows, row)
			continue
		}
		v := &vs[i]
		i++
		row := next()
		*row = cdcpb.Event_Row{StartTs: v.StartTs, CommitTs: v.CommitTs, Type: cdcpb.Event_COMMITTED,
			OpType: opType(v.Op), Key: v.Key, Value: v.Value}
		if d.oldValue {
			row.OldValue = v.OldValue
		}
		rows = append(rows, row)
	}
	return rows
}

// scanSlabRows is how many scan rows share one allocation.
const scanSlabRows = 256

// scanChunks is about how many deliveries a large scan is cut into, and
// bulkChunks how many a long live queue is.
const (
	scanChunks = 32
	bulkChunks = 8
)

func opType(op mvcc.Op) cdcpb.Event_Row_OpType {
	switch op {
	case mvcc.OpPut:
		return cdcpb.Event_Row_PUT
	case mvcc.OpDel:
		return cdcpb.Event_Row_DELETE
	}
	return cdcpb.Event_Row_UNKNOWN
}

// OnChange is the mvcc.Observer: it routes a data change to the live
// subscriptions of the region holding the key.
func (f *Feed) OnChange(c mvcc.Change) {
	if len(f.byRegion) == 0 {
		return
	}
	f.scratch = codec.EncodeBytes(f.scratch[:0], c.Key)
	dss := f.byRegion[f.b.Topo.LocateID(f.scratch)]
	for _, d := range dss {
		if !inRange(f.scratch, d.cmpStart, d.cmpEnd) {
			continue
		}
		row := &cdcpb.Event_Row{StartTs: c.StartTs, CommitTs: c.CommitTs, OpType: opType(c.Op), Key: c.Key}
		switch c.Kind {
		case mvcc.ChangePrewrite:
			row.Type, row.Value = cdcpb.Event_PREWRITE, c.Value
		case mvcc.ChangeCommit:
			row.Type = cdcpb.Event_COMMIT
		case mvcc.ChangeRollback:
			row.Type, row.OpType, row.CommitTs = cdcpb.Event_ROLLBACK, cdcpb.Event_Row_UNKNOWN, 0
		case mvcc.ChangeCommitted:
			row.Type, row.Value = cdcpb.Event_COMMITTED, c.Value
		}
		if d.oldValue && (c.Kind == mvcc.ChangePrewrite || c.Kind == mvcc.ChangeCommitted) {
			row.OldValue = c.OldValue
		}
		d.queue = append(d.queue, item{row: row})
	}
}

// ChangeKind says what happened to a region, for OnRegionChange.
type ChangeKind int

const (
	// SplitOrMerge: the region's range changed (EpochNotMatch).
	SplitOrMerge ChangeKind = iota + 1
	// LeaderMoved: the leader is elsewhere now (NotLeader).
	LeaderMoved
)

// OnRegionChange ends the subscriptions of region id after a topology
// change, queueing the region error TiKV sends: EpochNotMatch carrying the
// regions now covering the old range, or NotLeader naming the new leader.
func (f *Feed) OnRegionChange(id uint64, kind ChangeKind) {
	dss := append([]*downstream(nil), f.byRegion[id]...)
	for _, d := range dss {
		var e *cdcpb.Error
		switch kind {
		case SplitOrMerge:
			ep := &errorpb.EpochNotMatch{}
			for _, r := range f.b.Topo.Overlapping(d.cmpStart, d.cmpEnd) {
				ep.CurrentRegions = append(ep.CurrentRegions, r.Meta())
			}
			e = &cdcpb.Error{EpochNotMatch: ep}
		case LeaderMoved:
			ne := &errorpb.NotLeader{RegionId: id}
			if r, ok := f.b.Topo.Region(id); ok && r.Leader != 0 {
				lp := r.LeaderPeer()
				ne.Leader = &metapb.Peer{Id: lp.ID, StoreId: lp.StoreID}
			}
			e = &cdcpb.Error{NotLeader: ne}
		}
		f.fail(d, e)
	}
}

// OnStoreDown breaks every stream to store: undelivered messages are lost
// and every subscription on it ends (the client re-subscribes elsewhere).
func (f *Feed) OnStoreDown(storeID uint64) {
	for _, s := range append([]*Stream(nil), f.streams...) {
		if s.storeID == storeID {
			f.breakStream(s, fmt.Errorf("cdcfeed: stream %d to store %d: %w", s.id, storeID, ErrStoreDown), true)
		}
	}
}

// DropStream breaks one stream as a network failure would.
func (f *Feed) DropStream(s *Stream) {
	f.breakStream(s, fmt.Errorf("cdcfeed: stream %d to store %d: %w", s.id, s.storeID, ErrStreamDropped), true)
}

// Streams lists the open streams in creation order.
func (f *Feed) Streams() []*Stream { return append([]*Stream(nil), f.streams...) }

func (f *Feed) breakStream(s *Stream, err error, dropBuffered bool) {
	if s.err != nil {
		return
	}
	s.err = err
	for _, d := range s.dss {
		f.detach(d)
	}
	s.dss = nil
	if dropBuffered {
		s.recv = nil
	}
	for i, x := range f.streams {
		if x == s {
			f.streams = append(f.streams[:i:i], f.streams[i+1:]...)
			break
		}
	}
}

// Hold stops deliveries of region id's subscriptions until the clock
// reaches untilMs (math.MaxInt64: until Release). Other regions keep
// flowing, so holding reorders deliveries across regions.
func (f *Feed) Hold(regionID uint64, untilMs int64) { f.holds[regionID] = untilMs }

// Release lifts a Hold.
func (f *Feed) Release(regionID uint64) { delete(f.holds, regionID) }

// DuplicateWindow re-queues the last n rows delivered to each live
// subscription of region id, as a network retry would re-send them. Only
// rows a correct client can take twice are repeated, so the client's
// matcher stays balanced: COMMITTED rows above the resolved ts already
// delivered; PREWRITE rows whose COMMIT or ROLLBACK is also repeated, or
// whose lock is still in the store; COMMIT and ROLLBACK rows whose
// PREWRITE is repeated (COMMITs only above the delivered resolved ts). It
// returns the number of rows queued.
func (f *Feed) DuplicateWindow(regionID uint64, n int) int {
	total := 0
	type txnKey struct {
		startTs uint64
		key     string
	}
	for _, d := range f.byRegion[regionID] {
		h := d.history
		if len(h) > f.cfg.HistoryRows {
			h = h[len(h)-f.cfg.HistoryRows:]
		}
		if len(h) > n {
			h = h[len(h)-n:]
		}
		ends := map[txnKey]bool{}
		for _, r := range h {
			if (r.Type == cdcpb.Event_COMMIT && r.CommitTs > d.lastSent) || r.Type == cdcpb.Event_ROLLBACK {
				ends[txnKey{r.StartTs, string(r.Key)}] = true
			}
		}
		prewrites := map[txnKey]bool{}
		for _, r := range h {
			tk := txnKey{r.StartTs, string(r.Key)}
			switch r.Type {
			case cdcpb.Event_PREWRITE:
				l, locked := f.b.Store.LockOf(r.Key)
				if !ends[tk] && !(locked && l.StartTs == r.StartTs) {
					continue
				}
				prewrites[tk] = true
			case cdcpb.Event_COMMIT, cdcpb.Event_ROLLBACK:
				if !prewrites[tk] || !ends[tk] {
					continue
				}
			case cdcpb.Event_COMMITTED:
				if r.CommitTs <= d.lastSent {
					continue
				}
			default:
				continue
			}
			d.queue = append(d.queue, item{row: r})
			total++
		}
	}
	return total
}

// InjectRows queues arbitrary rows to every live subscription of region
// id, behind what is already queued, and returns how many subscriptions
// got them. It exists to make a client meet protocol violations TiKV
// would never produce (a COMMITTED row at or below the resolved ts, a
// COMMIT without PREWRITE, an unknown row type), to test fail-fast paths.
func (f *Feed) InjectRows(regionID uint64, rows ...*cdcpb.Event_Row) int {
	n := 0
	for _, d := range f.byRegion[regionID] {
		for _, r := range rows {
			d.queue = append(d.queue, item{row: r})
		}
		n++
	}
	return n
}

// FailRegion ends every live subscription of region id with error e
// (server_is_busy, congested, an empty unknown error, ...), queued behind
// their pending output, and returns how many it ended.
func (f *Feed) FailRegion(regionID uint64, e *cdcpb.Error) int {
	dss := append([]*downstream(nil), f.byRegion[regionID]...)
	for _, d := range dss {
		f.fail(d, e)
	}
	return len(dss)
}

// Tick runs a resolved-ts round when a ResolvedTsIntervalMs has passed on
// the clock since the last one. It reports whether a round ran.
func (f *Feed) Tick() bool {
	now := f.b.Clock.NowMs()
	if now-f.lastTickMs < f.cfg.ResolvedTsIntervalMs {
		return false
	}
	f.lastTickMs = now
	f.ResolvedRound()
	return true
}

// ResolvedRound computes, for every initialized live subscription,
// resolved ts = min(fresh TSO, min start_ts of data locks in its region)
// and sends it when it grew. Subscriptions with nothing queued get it at
// once, batched per (stream, request id, ts); others get it queued behind
// their pending rows so it never overtakes them.
func (f *Feed) ResolvedRound() {
	now := f.b.Oracle.Next()
	type group struct {
		reqID, ts uint64
	}
	for _, s := range f.streams {
		batches := map[group][]uint64{}
		var order []group
		for _, d := range s.dss {
			if d.closed || !d.initSent {
				continue
			}
			ts := now
			if m, ok := f.b.Store.MinLockTs(d.regRawS, d.regRawE); ok && m < ts {
				ts = m
			}
			if ts <= d.lastQueued {
				continue
			}
			d.lastQueued = ts
			f.maxIssued = max(f.maxIssued, ts)
			ik := issuedKey{d.regionID, d.regVersion}
			if m := f.issued[ik]; m != nil {
				m.ts = max(m.ts, ts)
			} else {
				f.issued[ik] = &issuedMark{start: d.regCmpS, end: d.regCmpE, ts: ts}
			}
			if len(d.queue) > 0 || f.held(d.regionID) {
				d.queue = append(d.queue, item{resolved: ts})
				continue
			}
			d.lastSent = ts
			g := group{d.reqID, ts}
			if _, ok := batches[g]; !ok {
				order = append(order, g)
			}
			batches[g] = append(batches[g], d.regionID)
		}
		for _, g := range order {
			f.put(s, &cdcpb.ChangeDataEvent{ResolvedTs: &cdcpb.ResolvedTs{Regions: batches[g], Ts: g.ts, RequestId: g.reqID}})
		}
	}
}

func (f *Feed) held(regionID uint64) bool {
	until, ok := f.holds[regionID]
	if !ok {
		return false
	}
	if f.b.Clock.NowMs() >= until {
		delete(f.holds, regionID)
		return false
	}
	return true
}

func (f *Feed) put(s *Stream, ev *cdcpb.ChangeDataEvent) {
	s.recv = append(s.recv, ev)
	if f.tap != nil {
		f.tap(s.storeID, s.id, ev)
	}
}

func (d *downstream) hasWork() bool {
	return len(d.queue) > 0 || (!d.initSent && !d.closed)
}

// Pending reports whether any subscription has something to deliver
// (held ones included).
func (f *Feed) Pending() bool {
	for _, s := range f.streams {
		for _, d := range s.dss {
			if d.hasWork() {
				return true
			}
		}
	}
	return false
}

// Step delivers one batch of one ready subscription, picked by the seeded
// scheduler. It reports false when nothing is ready.
func (f *Feed) Step() bool {
	f.collectReady()
	if len(f.ready) == 0 {
		return false
	}
	d := f.ready[f.rng.Intn(len(f.ready))]
	f.deliver(d)
	if d.closed && len(d.queue) == 0 {
		d.s.compact()
	}
	return true
}

// DeliverAll steps until nothing is ready and returns the number of steps.
// It picks exactly like repeated Steps would, but keeps the ready list
// between picks instead of rebuilding it (delivery creates no new work).
func (f *Feed) DeliverAll() int {
	n := 0
	for {
		f.collectReady()
		if len(f.ready) == 0 {
			return n
		}
		for len(f.ready) > 0 {
			i := f.rng.Intn(len(f.ready))
			d := f.ready[i]
			f.deliver(d)
			n++
			if !d.hasWork() {
				if d.closed {
					d.s.compact()
				}
				copy(f.ready[i:], f.ready[i+1:])
				f.ready[len(f.ready)-1] = nil
				f.ready = f.ready[:len(f.ready)-1]
			}
		}
	}
}

func (f *Feed) collectReady() {
	f.ready = f.ready[:0]
	for _, s := range f.streams {
		for _, d := range s.dss {
			if d.hasWork() && !f.held(d.regionID) {
				f.ready = append(f.ready, d)
			}
		}
	}
}

// entriesMessage is one delivered message of one Entries event, allocated
// at once.
type entriesMessage struct {
	msg     cdcpb.ChangeDataEvent
	evs     [1]*cdcpb.Event
	ev      cdcpb.Event
	wrap    cdcpb.Event_Entries_
	entries cdcpb.Event_Entries
}

func (f *Feed) putEntries(d *downstream, rows []*cdcpb.Event_Row) {
	m := &entriesMessage{}
	m.entries.Entries = rows
	m.wrap.Entries = &m.entries
	m.ev = cdcpb.Event{RegionId: d.regionID, RequestId: d.reqID, Event: &m.wrap}
	m.evs[0] = &m.ev
	m.msg.Events = m.evs[:]
	f.put(d.s, &m.msg)
}

func (f *Feed) deliver(d *downstream) {
	if !d.initSent && !d.closed && (len(d.queue) == 0 || f.rng.Intn(3) != 0) {
		// Next chunk of the incremental scan, INITIALIZED after the last.
		n := min(max(d.scanChunk, 1), len(d.scan))
		var rows []*cdcpb.Event_Row
		if n == len(d.scan) {
			rows = make([]*cdcpb.Event_Row, n, n+1)
			copy(rows, d.scan)
			rows = append(rows, &cdcpb.Event_Row{Type: cdcpb.Event_INITIALIZED})
			d.initSent = true
			d.scan = nil
		} else {
			rows = d.scan[:n:n]
			d.scan = d.scan[n:]
		}
		f.putEntries(d, rows)
		return
	}
	head := d.queue[0]
	switch {
	case head.err != nil:
		d.queue = d.queue[1:]
		ev := &cdcpb.Event{RegionId: d.regionID, RequestId: d.reqID, Event: &cdcpb.Event_Error{Error: head.err}}
		f.put(d.s, &cdcpb.ChangeDataEvent{Events: []*cdcpb.Event{ev}})
	case head.row == nil:
		d.queue = d.queue[1:]
		if head.resolved > d.lastSent {
			d.lastSent = head.resolved
			f.put(d.s, &cdcpb.ChangeDataEvent{ResolvedTs: &cdcpb.ResolvedTs{Regions: []uint64{d.regionID}, Ts: head.resolved, RequestId: d.reqID}})
		}
	default:
		most := f.cfg.MaxBatchRows
		if len(d.queue) > bulkChunks*f.cfg.MaxBatchRows {
			most = min(len(d.queue)/bulkChunks, f.cfg.MaxBulkBatchRows)
		}
		limit := 1 + f.rng.Intn(most)
		n := 0
		for n < len(d.queue) && n < limit && d.queue[n].row != nil {
			n++
		}
		rows := make([]*cdcpb.Event_Row, n)
		for i := range rows {
			rows[i] = d.queue[i].row
			d.queue[i] = item{}
		}
		d.queue = d.queue[n:]
		if d.initSent {
			// Trimmed only when twice the window: the copy is amortized.
			d.history = append(d.history, rows...)
			if over := len(d.history) - f.cfg.HistoryRows; over > f.cfg.HistoryRows {
				d.history = append(d.history[:0:0], d.history[over:]...)
			}
		}
		f.putEntries(d, rows)
	}
	if len(d.queue) == 0 {
		d.queue = nil
	}
}
