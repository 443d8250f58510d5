package logpuller

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sort"
	"sync"
	"testing"

	"github.com/pingcap/kvproto/pkg/cdcpb"
	"github.com/pingcap/kvproto/pkg/errorpb"
	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	"github.com/pingcap/kvproto/pkg/metapb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
)

// This file is a minimal TiKV ChangeData double over real gRPC on
// 127.0.0.1, independent of fakeupstream: a handful of regions with
// epochs and leaders, committed rows, and per-region scripted errors. It
// checks the request fields the transport must send and lets tests break
// streams at will. Scenario tests over the full fake cluster live in
// grpc_cluster_test.go.

type dblRegion struct {
	id       uint64
	start    []byte // comparable
	end      []byte
	version  uint64
	leader   uint64 // store id
	failNext []*cdcpb.Error
}

type dblRow struct {
	key      []byte // raw
	value    []byte
	startTs  uint64
	commitTs uint64
}

type dblReg struct {
	st       *dblStream
	reqID    uint64
	regionID uint64
	start    []byte
	end      []byte
	inited   bool
}

type dblStream struct {
	store  *dblStore
	mux    bool
	v1     bool
	out    chan *cdcpb.ChangeDataEvent
	cancel context.CancelFunc
}

type dblStore struct {
	id   uint64
	addr string
	srv  *grpc.Server
	noV2 bool
	cdcpb.UnimplementedChangeDataServer
	c *dblCluster
}

type dblCluster struct {
	t         testing.TB
	clusterID uint64

	mu       sync.Mutex
	regions  []*dblRegion
	rows     []dblRow
	stores   map[uint64]*dblStore
	regs     []*dblReg
	requests []*cdcpb.ChangeDataRequest
	bad      []string // protocol violations seen by the server
	streams  map[*dblStream]bool
	// dupAfterInit re-sends every committed row of a registration after
	// INITIALIZED (as a TiKV re-scan after a reconnect would).
	locator *dblLocator
}

func newDblCluster(t testing.TB, stores int, noV2 bool) *dblCluster {
	c := &dblCluster{t: t, clusterID: 4242, stores: map[uint64]*dblStore{}, streams: map[*dblStream]bool{}}
	c.regions = []*dblRegion{{id: 1, version: 1, leader: 1}}
	for i := 1; i <= stores; i++ {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := &dblStore{id: uint64(i), addr: lis.Addr().String(), srv: grpc.NewServer(), noV2: noV2, c: c}
		if noV2 {
			cdcpb.RegisterChangeDataServer(s.srv, &v1Only{s})
		} else {
			cdcpb.RegisterChangeDataServer(s.srv, s)
		}
		c.stores[s.id] = s
		go func() { _ = s.srv.Serve(lis) }()
	}
	c.locator = &dblLocator{c: c}
	t.Cleanup(func() {
		for _, s := range c.stores {
			s.srv.Stop()
		}
	})
	return c
}

// v1Only answers EventFeedV2 with Unimplemented (TiKV before 7.x).
type v1Only struct{ s *dblStore }

func (v *v1Only) EventFeed(stream cdcpb.ChangeData_EventFeedServer) error {
	return v.s.serve(stream, false, true)
}

func (v *v1Only) EventFeedV2(cdcpb.ChangeData_EventFeedV2Server) error {
	return status.Error(codes.Unimplemented, "EventFeedV2 is not supported")
}

func (s *dblStore) EventFeed(stream cdcpb.ChangeData_EventFeedServer) error {
	return s.serve(stream, false, true)
}

func (s *dblStore) EventFeedV2(stream cdcpb.ChangeData_EventFeedV2Server) error {
	mux := false
	if md, ok := metadata.FromIncomingContext(stream.Context()); ok {
		for _, v := range md.Get(featuresKey) {
			mux = mux || v == streamMultiplexing
		}
	}
	return s.serve(stream, mux, false)
}

type serverStream interface {
	Send(*cdcpb.ChangeDataEvent) error
	Recv() (*cdcpb.ChangeDataRequest, error)
	Context() context.Context
}

func (s *dblStore) serve(stream serverStream, mux, v1 bool) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	st := &dblStream{store: s, mux: mux, v1: v1, out: make(chan *cdcpb.ChangeDataEvent, 1<<16), cancel: cancel}
	s.c.mu.Lock()
	s.c.streams[st] = true
	s.c.mu.Unlock()
	defer func() {
		s.c.mu.Lock()
		delete(s.c.streams, st)
		keep := s.c.regs[:0]
		for _, r := range s.c.regs {
			if r.st != st {
				keep = append(keep, r)
			}
		}
		s.c.regs = keep
		s.c.mu.Unlock()
	}()
	go func() {
		for {
			req, err := stream.Recv()
			if err != nil {
				cancel()
				return
			}
			s.c.handle(st, req)
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return status.Error(codes.Unavailable, "stream reset by the double")
		case ev := <-st.out:
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
	}
}

func (c *dblCluster) violation(format string, args ...any) {
	c.bad = append(c.bad, fmt.Sprintf(format, args...))
}

func (c *dblCluster) region(id uint64) *dblRegion {
	for _, r := range c.regions {
		if r.id == id {
			return r
		}
	}
	return nil
}

func errEvent(req *cdcpb.ChangeDataRequest, e *cdcpb.Error) *cdcpb.ChangeDataEvent {
	return &cdcpb.ChangeDataEvent{Events: []*cdcpb.Event{{RegionId: req.RegionId, RequestId: req.RequestId, Event: &cdcpb.Event_Error{Error: e}}}}
}

func (c *dblCluster) handle(st *dblStream, req *cdcpb.ChangeDataRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests = append(c.requests, req)
	if _, ok := req.Request.(*cdcpb.ChangeDataRequest_Deregister_); ok {
		keep := c.regs[:0]
		for _, r := range c.regs {
			if r.st == st && r.reqID == req.RequestId && (req.RegionId == 0 || req.RegionId == r.regionID) {
				continue
			}
			keep = append(keep, r)
		}
		c.regs = keep
		return
	}
	// Request fields (facts §1.1).
	if req.Header.GetClusterId() != c.clusterID || req.Header.GetTicdcVersion() != ClientVersion {
		c.violation("header %v", req.Header)
	}
	if req.ExtraOp != kvrpcpb.ExtraOp_ReadOldValue || req.KvApi != cdcpb.ChangeDataRequest_TiDB || req.RequestId == 0 {
		c.violation("request fields %v", req)
	}
	for _, r := range c.regs {
		if r.st == st && r.regionID == req.RegionId && (!st.mux || r.reqID == req.RequestId) {
			c.violation("duplicate registration of region %d on one stream", req.RegionId)
			st.out <- errEvent(req, &cdcpb.Error{DuplicateRequest: &cdcpb.DuplicateRequest{RegionId: req.RegionId}})
			return
		}
	}
	r := c.region(req.RegionId)
	if r == nil {
		st.out <- errEvent(req, &cdcpb.Error{RegionNotFound: &errorpb.RegionNotFound{RegionId: req.RegionId}})
		return
	}
	if len(r.failNext) > 0 {
		e := r.failNext[0]
		r.failNext = r.failNext[1:]
		st.out <- errEvent(req, e)
		return
	}
	if req.RegionEpoch.GetVersion() != r.version {
		st.out <- errEvent(req, &cdcpb.Error{EpochNotMatch: &errorpb.EpochNotMatch{}})
		return
	}
	if r.leader != st.store.id {
		st.out <- errEvent(req, &cdcpb.Error{NotLeader: &errorpb.NotLeader{RegionId: r.id, Leader: &metapb.Peer{Id: r.leader * 100, StoreId: r.leader}}})
		return
	}
	// The observed range must be the region ∩ span (inside the region).
	if bytes.Compare(req.StartKey, r.start) < 0 || (len(r.end) > 0 && (len(req.EndKey) == 0 || bytes.Compare(req.EndKey, r.end) > 0)) {
		c.violation("request range [%x, %x) outside region %d [%x, %x)", req.StartKey, req.EndKey, r.id, r.start, r.end)
	}
	reg := &dblReg{st: st, reqID: req.RequestId, regionID: r.id, start: req.StartKey, end: req.EndKey}
	c.regs = append(c.regs, reg)
	var rows []*cdcpb.Event_Row
	for _, row := range c.rows {
		if row.commitTs > req.CheckpointTs && reg.covers(row.key) {
			rows = append(rows, &cdcpb.Event_Row{StartTs: row.startTs, CommitTs: row.commitTs, Type: cdcpb.Event_COMMITTED,
				OpType: cdcpb.Event_Row_PUT, Key: row.key, Value: row.value})
		}
	}
	rows = append(rows, &cdcpb.Event_Row{Type: cdcpb.Event_INITIALIZED})
	reg.inited = true
	// Scan output in messages of up to scanChunk rows, as TiKV batches it.
	const scanChunk = 512
	for len(rows) > 0 {
		n := min(len(rows), scanChunk)
		st.out <- &cdcpb.ChangeDataEvent{Events: []*cdcpb.Event{{RegionId: r.id, RequestId: req.RequestId,
			Event: &cdcpb.Event_Entries_{Entries: &cdcpb.Event_Entries{Entries: rows[:n]}}}}}
		rows = rows[n:]
	}
}

func (r *dblReg) covers(raw []byte) bool {
	k := codec.EncodeBytes(nil, raw)
	return bytes.Compare(k, r.start) >= 0 && (len(r.end) == 0 || bytes.Compare(k, r.end) < 0)
}

// commit writes a row and streams PREWRITE + COMMIT to every registration
// that covers it.
func (c *dblCluster) commit(raw, value []byte, startTs, commitTs uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rows = append(c.rows, dblRow{key: raw, value: value, startTs: startTs, commitTs: commitTs})
	for _, reg := range c.regs {
		if !reg.covers(raw) {
			continue
		}
		reg.st.out <- &cdcpb.ChangeDataEvent{Events: []*cdcpb.Event{{RegionId: reg.regionID, RequestId: reg.reqID,
			Event: &cdcpb.Event_Entries_{Entries: &cdcpb.Event_Entries{Entries: []*cdcpb.Event_Row{
				{StartTs: startTs, Type: cdcpb.Event_PREWRITE, OpType: cdcpb.Event_Row_PUT, Key: raw, Value: value},
				{StartTs: startTs, CommitTs: commitTs, Type: cdcpb.Event_COMMIT, OpType: cdcpb.Event_Row_PUT, Key: raw},
			}}}}}}
	}
}

// resolve sends a batched resolved ts to every registration: per request
// id on multiplexed streams, one batch per stream otherwise.
func (c *dblCluster) resolve(ts uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	type key struct {
		st  *dblStream
		req uint64
	}
	batches := map[key][]uint64{}
	for _, reg := range c.regs {
		k := key{st: reg.st}
		if reg.st.mux {
			k.req = reg.reqID
		}
		batches[k] = append(batches[k], reg.regionID)
	}
	for k, ids := range batches {
		k.st.out <- &cdcpb.ChangeDataEvent{ResolvedTs: &cdcpb.ResolvedTs{Regions: ids, Ts: ts, RequestId: k.req}}
	}
}

// failRegion sends err for every registration of region id (as TiKV does
// when it drops a region's downstreams).
func (c *dblCluster) failRegion(id uint64, e *cdcpb.Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	keep := c.regs[:0]
	for _, reg := range c.regs {
		if reg.regionID != id {
			keep = append(keep, reg)
			continue
		}
		reg.st.out <- &cdcpb.ChangeDataEvent{Events: []*cdcpb.Event{{RegionId: id, RequestId: reg.reqID, Event: &cdcpb.Event_Error{Error: e}}}}
	}
	c.regs = keep
}

// split cuts region id at raw key; the right half gets newID; both bump
// their version, and the region's subscribers get epoch_not_match.
func (c *dblCluster) split(id, newID uint64, raw []byte) {
	c.mu.Lock()
	r := c.region(id)
	at := codec.EncodeBytes(nil, raw)
	right := &dblRegion{id: newID, start: at, end: r.end, version: r.version + 1, leader: r.leader}
	r.end = at
	r.version++
	c.regions = append(c.regions, right)
	sort.Slice(c.regions, func(i, j int) bool { return bytes.Compare(c.regions[i].start, c.regions[j].start) < 0 })
	c.mu.Unlock()
	c.failRegion(id, &cdcpb.Error{EpochNotMatch: &errorpb.EpochNotMatch{}})
}

func (c *dblCluster) setLeader(id, store uint64) {
	c.mu.Lock()
	c.region(id).leader = store
	c.mu.Unlock()
	c.failRegion(id, &cdcpb.Error{NotLeader: &errorpb.NotLeader{RegionId: id, Leader: &metapb.Peer{Id: store * 100, StoreId: store}}})
}

func (c *dblCluster) queueError(id uint64, e *cdcpb.Error) {
	c.mu.Lock()
	c.region(id).failNext = append(c.region(id).failNext, e)
	c.mu.Unlock()
}

// resetStreams ends every open stream of a store (server-side reset).
func (c *dblCluster) resetStreams(store uint64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for st := range c.streams {
		if st.store.id == store {
			st.cancel()
			n++
		}
	}
	return n
}

func (c *dblCluster) violations() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.bad...)
}

func (c *dblCluster) requestCount(pred func(*cdcpb.ChangeDataRequest) bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, r := range c.requests {
		if pred(r) {
			n++
		}
	}
	return n
}

func (c *dblCluster) streamCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.streams)
}

// dblLocator is a RegionLocator over the double's regions. It can be told
// to hand out a stale view (the old epoch) a number of times, to model a
// lagging PD during an epoch-not-match storm.
type dblLocator struct {
	c           *dblCluster
	mu          sync.Mutex
	stale       map[uint64]int
	leaderHints map[uint64]uint64
	invalidated []uint64
	leaderCalls []uint64
}

func (l *dblLocator) LocateSpan(_ context.Context, span kvevent.Span) ([]RegionInfo, error) {
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []RegionInfo
	for _, r := range l.c.regions {
		if _, ok := Intersect(kvevent.Span{StartKey: r.start, EndKey: r.end}, span); !ok {
			continue
		}
		ver := r.version
		if l.stale[r.id] > 0 {
			l.stale[r.id]--
			ver--
		}
		leader := r.leader
		if h, ok := l.leaderHints[r.id]; ok {
			leader = h
		}
		out = append(out, RegionInfo{ID: r.id, Epoch: &metapb.RegionEpoch{Version: ver, ConfVer: 1}, StartKey: r.start, EndKey: r.end,
			LeaderStoreID: leader, LeaderAddr: l.c.stores[leader].addr})
	}
	return out, nil
}

func (l *dblLocator) UpdateLeader(r RegionInfo, leader *metapb.Peer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leaderCalls = append(l.leaderCalls, r.ID)
	if l.leaderHints == nil {
		l.leaderHints = map[uint64]uint64{}
	}
	if leader != nil {
		l.leaderHints[r.ID] = leader.StoreId
	} else {
		delete(l.leaderHints, r.ID)
	}
}

func (l *dblLocator) Invalidate(r RegionInfo) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.invalidated = append(l.invalidated, r.ID)
}

// commitMany writes n rows (handles from..from+n-1 of table) as one
// transaction and streams them to covering registrations in messages of
// up to 256 rows (PREWRITE + COMMIT pairs).
func (c *dblCluster) commitMany(table, from int64, n int, value []byte, startTs, commitTs uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = rawKey(table, from+int64(i))
		c.rows = append(c.rows, dblRow{key: keys[i], value: value, startTs: startTs, commitTs: commitTs})
	}
	for _, reg := range c.regs {
		var rows []*cdcpb.Event_Row
		flush := func() {
			if len(rows) == 0 {
				return
			}
			reg.st.out <- &cdcpb.ChangeDataEvent{Events: []*cdcpb.Event{{RegionId: reg.regionID, RequestId: reg.reqID,
				Event: &cdcpb.Event_Entries_{Entries: &cdcpb.Event_Entries{Entries: rows}}}}}
			rows = nil
		}
		for _, k := range keys {
			if !reg.covers(k) {
				continue
			}
			rows = append(rows,
				&cdcpb.Event_Row{StartTs: startTs, Type: cdcpb.Event_PREWRITE, OpType: cdcpb.Event_Row_PUT, Key: k, Value: value},
				&cdcpb.Event_Row{StartTs: startTs, CommitTs: commitTs, Type: cdcpb.Event_COMMIT, OpType: cdcpb.Event_Row_PUT, Key: k})
			if len(rows) >= 512 {
				flush()
			}
		}
		flush()
	}
}

// splitMany cuts the single initial region into n regions at handles of
// table (for subscription benchmarks).
func (c *dblCluster) splitMany(table int64, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.regions[0]
	c.regions = c.regions[:0]
	prev := r.start
	for i := 1; i < n; i++ {
		at := codec.EncodeBytes(nil, rawKey(table, int64(i)*1000))
		c.regions = append(c.regions, &dblRegion{id: uint64(100 + i), start: prev, end: at, version: 2, leader: r.leader})
		prev = at
	}
	c.regions = append(c.regions, &dblRegion{id: uint64(100 + n), start: prev, end: r.end, version: 2, leader: r.leader})
}
