package grpcserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/pingcap/kvproto/pkg/metapb"
	"github.com/pingcap/kvproto/pkg/pdpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/searchfabric/sfemu/fakeupstream/topology"
	"github.com/searchfabric/sfemu/upstream/kvevent"
)

// pdServer answers what the real PD client and client-go's region cache
// ask. Anything else is Unimplemented (from the embedded type).
type pdServer struct {
	pdpb.UnimplementedPDServer
	s *Servers

	mu sync.Mutex
	gc *gcSafePoints
	// saved is the service table as last saved (saveServices).
	saved string
}

func newPDServer(s *Servers) (*pdServer, error) {
	p := &pdServer{s: s, gc: newGCSafePoints()}
	if err := p.gc.restore(s.c.Meta(serviceSafePointsMeta)); err != nil {
		return nil, err
	}
	p.saved = string(p.gc.marshal())
	return p, nil
}

// saveServices saves the service table in the cluster's meta when it
// changed, so a durable cluster's PD keeps every service's safe point
// across a restart, as PD keeps them in etcd (G27). Called under p.mu.
func (p *pdServer) saveServices() error {
	b := p.gc.marshal()
	if string(b) == p.saved {
		return nil
	}
	if err := p.s.c.SaveMeta(serviceSafePointsMeta, b); err != nil {
		return err
	}
	p.saved = string(b)
	return nil
}

const pdMemberID = 1

func (p *pdServer) header() *pdpb.ResponseHeader {
	return &pdpb.ResponseHeader{ClusterId: p.s.cfg.ClusterID}
}

// check validates a request header: a cluster id other than 0 (unknown
// yet) and ours is refused, as PD refuses a client of another cluster.
// (G10)
func (p *pdServer) check(h *pdpb.RequestHeader) error {
	if id := h.GetClusterId(); id != 0 && id != p.s.cfg.ClusterID {
		return status.Errorf(codes.FailedPrecondition, "mismatch cluster id, need %d but got %d", p.s.cfg.ClusterID, id)
	}
	return nil
}

func (p *pdServer) member() *pdpb.Member {
	return &pdpb.Member{
		Name:       "fake-pd-1",
		MemberId:   pdMemberID,
		PeerUrls:   []string{p.s.PDURL()},
		ClientUrls: []string{p.s.PDURL()},
	}
}

// GetMembers lists the single PD member, which is also the leader. (G11)
func (p *pdServer) GetMembers(ctx context.Context, req *pdpb.GetMembersRequest) (*pdpb.GetMembersResponse, error) {
	if err := p.check(req.GetHeader()); err != nil {
		return nil, err
	}
	m := p.member()
	return &pdpb.GetMembersResponse{Header: p.header(), Members: []*pdpb.Member{m}, Leader: m, EtcdLeader: m}, nil
}

// GetClusterInfo says PD runs in PD mode (TSO served by PD itself). (G11)
func (p *pdServer) GetClusterInfo(ctx context.Context, req *pdpb.GetClusterInfoRequest) (*pdpb.GetClusterInfoResponse, error) {
	return &pdpb.GetClusterInfoResponse{Header: p.header(), ServiceModes: []pdpb.ServiceMode{pdpb.ServiceMode_PD_SVC_MODE}}, nil
}

// Tso answers each request of count n with the last of n consecutive
// timestamps sharing one physical part, as PD does; the client derives
// the others by counting the logical part down. (G12)
func (p *pdServer) Tso(stream pdpb.PD_TsoServer) error {
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := p.check(req.GetHeader()); err != nil {
			return err
		}
		n := req.GetCount()
		if n == 0 || n > maxTSOCount {
			return status.Errorf(codes.InvalidArgument, "tso request count %d is outside 1..%d", n, maxTSOCount)
		}
		last, err := p.allocTSO(n)
		if err != nil {
			return status.Errorf(codes.Unavailable, "tso: %v", err)
		}
		resp := &pdpb.TsoResponse{Header: p.header(), Count: n, Timestamp: &pdpb.Timestamp{
			Physical: int64(last >> 18), Logical: int64(last & (1<<18 - 1)),
		}}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

// maxTSOCount bounds one TSO request: n consecutive logicals must fit in
// one physical millisecond (2^18), and PD clients batch far fewer.
const maxTSOCount = 1 << 16

// allocTSO takes n consecutive timestamps from the cluster oracle and
// returns the last. If the physical part moves inside the batch, the batch
// restarts from there so all n share one physical part. An oracle that
// failed (its durable high-water mark could not be saved) hands out 0: that
// is an error to the client, never a timestamp.
func (p *pdServer) allocTSO(n uint32) (uint64, error) {
	o := p.s.c.Oracle()
	for {
		first := o.Next()
		if first == 0 {
			return 0, fmt.Errorf("the cluster's oracle stopped: %v", o.Err())
		}
		last := first
		ok := true
		for i := uint32(1); i < n; i++ {
			t := o.Next()
			if t != last+1 || t>>18 != first>>18 {
				ok = false
				break
			}
			last = t
		}
		if ok {
			return last, nil
		}
	}
}

func leaderPeer(r *topology.Region) *metapb.Peer {
	if r.Leader == 0 {
		return nil
	}
	lp := r.LeaderPeer()
	return &metapb.Peer{Id: lp.ID, StoreId: lp.StoreID}
}

// downPeers lists the peers of r on stores that are down. (G13)
func (p *pdServer) downPeers(r *topology.Region, up map[uint64]bool) []*pdpb.PeerStats {
	var out []*pdpb.PeerStats
	for _, peer := range r.Peers {
		if !up[peer.StoreID] {
			out = append(out, &pdpb.PeerStats{Peer: &metapb.Peer{Id: peer.ID, StoreId: peer.StoreID}, DownSeconds: 60})
		}
	}
	return out
}

func (p *pdServer) upStores() map[uint64]bool {
	up := map[uint64]bool{}
	for _, st := range p.s.c.Stores() {
		up[st.ID] = st.Up
	}
	return up
}

func (p *pdServer) regionResp(r *topology.Region) *pdpb.GetRegionResponse {
	return &pdpb.GetRegionResponse{Header: p.header(), Region: r.Meta(), Leader: leaderPeer(r), DownPeers: p.downPeers(r, p.upStores())}
}

// GetRegion returns the region holding region_key, a comparable key;
// boundaries are comparable keys too (EncodeBytes), as PD stores them.
// (G13)
func (p *pdServer) GetRegion(ctx context.Context, req *pdpb.GetRegionRequest) (*pdpb.GetRegionResponse, error) {
	if err := p.check(req.GetHeader()); err != nil {
		return nil, err
	}
	if r, ok := p.regionAt(req.GetRegionKey()); ok {
		return p.regionResp(&r), nil
	}
	return &pdpb.GetRegionResponse{Header: p.header()}, nil
}

// regionAt returns the region holding comparable key k without copying
// the whole region list (lookups stay O(log n) with many regions).
func (p *pdServer) regionAt(k []byte) (topology.Region, bool) {
	end := append(append(make([]byte, 0, len(k)+1), k...), 0)
	rs := p.s.c.RegionsInSpan(kvevent.Span{StartKey: k, EndKey: end})
	if len(rs) == 0 || !rs[0].Contains(k) {
		return topology.Region{}, false
	}
	return rs[0], true
}

// GetPrevRegion returns the region just before the one holding region_key
// (an empty answer when that is the first region). (G13)
func (p *pdServer) GetPrevRegion(ctx context.Context, req *pdpb.GetRegionRequest) (*pdpb.GetRegionResponse, error) {
	if err := p.check(req.GetHeader()); err != nil {
		return nil, err
	}
	regions := p.s.c.Regions()
	for i := range regions {
		if regions[i].Contains(req.GetRegionKey()) {
			if i == 0 {
				break
			}
			return p.regionResp(&regions[i-1]), nil
		}
	}
	return &pdpb.GetRegionResponse{Header: p.header()}, nil
}

// GetRegionByID returns region id, or a response without a region when PD
// does not know it (the client treats that as "not found"). (G13)
func (p *pdServer) GetRegionByID(ctx context.Context, req *pdpb.GetRegionByIDRequest) (*pdpb.GetRegionResponse, error) {
	if err := p.check(req.GetHeader()); err != nil {
		return nil, err
	}
	r, ok := p.s.c.Region(req.GetRegionId())
	if !ok {
		return &pdpb.GetRegionResponse{Header: p.header()}, nil
	}
	return p.regionResp(&r), nil
}

// scan returns the regions intersecting [start, end) (comparable, empty
// end = +inf), at most limit (<= 0: all).
func scanRegions(all []topology.Region, start, end []byte, limit int) []topology.Region {
	var out []topology.Region
	for i := range all {
		r := &all[i]
		if len(r.EndKey) > 0 && bytes.Compare(r.EndKey, start) <= 0 {
			continue
		}
		if len(end) > 0 && bytes.Compare(r.StartKey, end) >= 0 {
			break
		}
		out = append(out, *r)
		if limit > 0 && len(out) >= limit {
			break
		}
	}
	return out
}

// ScanRegions lists regions from start_key to end_key, up to limit. (G14)
func (p *pdServer) ScanRegions(ctx context.Context, req *pdpb.ScanRegionsRequest) (*pdpb.ScanRegionsResponse, error) {
	if err := p.check(req.GetHeader()); err != nil {
		return nil, err
	}
	up := p.upStores()
	resp := &pdpb.ScanRegionsResponse{Header: p.header()}
	all := p.s.c.RegionsInSpan(kvevent.Span{StartKey: req.GetStartKey(), EndKey: req.GetEndKey()})
	for _, r := range scanRegions(all, req.GetStartKey(), req.GetEndKey(), int(req.GetLimit())) {
		meta, leader := r.Meta(), leaderPeer(&r)
		resp.RegionMetas = append(resp.RegionMetas, meta)
		resp.Leaders = append(resp.Leaders, leader)
		resp.Regions = append(resp.Regions, &pdpb.Region{Region: meta, Leader: leader, DownPeers: p.downPeers(&r, up)})
	}
	return resp, nil
}

// BatchScanRegions lists the regions of several ordered ranges, each
// region once, up to limit in total; with contain_all_key_range a result
// that does not cover every range is answered with
// REGIONS_NOT_CONTAIN_ALL_KEY_RANGE. (G14)
func (p *pdServer) BatchScanRegions(ctx context.Context, req *pdpb.BatchScanRegionsRequest) (*pdpb.BatchScanRegionsResponse, error) {
	if err := p.check(req.GetHeader()); err != nil {
		return nil, err
	}
	up := p.upStores()
	resp := &pdpb.BatchScanRegionsResponse{Header: p.header()}
	seen := map[uint64]bool{}
	limit := int(req.GetLimit())
	complete := true
	for _, kr := range req.GetRanges() {
		if limit > 0 && len(resp.Regions) >= limit {
			complete = false
			break
		}
		rs := p.s.c.RegionsInSpan(kvevent.Span{StartKey: kr.GetStartKey(), EndKey: kr.GetEndKey()})
		for i := range rs {
			r := &rs[i]
			if seen[r.ID] {
				continue
			}
			if limit > 0 && len(resp.Regions) >= limit {
				complete = false
				break
			}
			seen[r.ID] = true
			resp.Regions = append(resp.Regions, &pdpb.Region{Region: r.Meta(), Leader: leaderPeer(r), DownPeers: p.downPeers(r, up)})
		}
	}
	if !complete && req.GetContainAllKeyRange() {
		return &pdpb.BatchScanRegionsResponse{Header: &pdpb.ResponseHeader{ClusterId: p.s.cfg.ClusterID, Error: &pdpb.Error{
			Type: pdpb.ErrorType_REGIONS_NOT_CONTAIN_ALL_KEY_RANGE, Message: "limit reached before every range was covered",
		}}}, nil
	}
	return resp, nil
}

// store converts a topology store. metapb has no "down" state: PD keeps a
// dead store Up until an operator removes it and clients learn it is down
// from failed requests and health checks, so a down store is reported Up
// here too; its TiKV server answers Unavailable (G30). (G15)
func (p *pdServer) store(id uint64) *metapb.Store {
	return &metapb.Store{
		Id:            id,
		Address:       p.s.StoreAddr(id),
		State:         metapb.StoreState_Up,
		NodeState:     metapb.NodeState_Serving,
		Version:       "8.5.0",
		StatusAddress: p.s.StoreAddr(id),
	}
}

// GetStore returns a store with the address of its TiKV server. (G15)
func (p *pdServer) GetStore(ctx context.Context, req *pdpb.GetStoreRequest) (*pdpb.GetStoreResponse, error) {
	if err := p.check(req.GetHeader()); err != nil {
		return nil, err
	}
	for _, st := range p.s.c.Stores() {
		if st.ID == req.GetStoreId() {
			return &pdpb.GetStoreResponse{Header: p.header(), Store: p.store(st.ID), Stats: &pdpb.StoreStats{StoreId: st.ID}}, nil
		}
	}
	h := p.header()
	h.Error = &pdpb.Error{Type: pdpb.ErrorType_UNKNOWN, Message: "invalid store ID " + itoa(req.GetStoreId()) + ", not found"}
	return &pdpb.GetStoreResponse{Header: h}, nil
}

// GetAllStores lists every store. (G15)
func (p *pdServer) GetAllStores(ctx context.Context, req *pdpb.GetAllStoresRequest) (*pdpb.GetAllStoresResponse, error) {
	if err := p.check(req.GetHeader()); err != nil {
		return nil, err
	}
	resp := &pdpb.GetAllStoresResponse{Header: p.header()}
	for _, st := range p.s.c.Stores() {
		resp.Stores = append(resp.Stores, p.store(st.ID))
	}
	return resp, nil
}

// ---- GC ----

func (p *pdServer) gcSafePoint() uint64 {
	sp, _ := p.s.c.GCSafePoint(context.Background())
	return sp
}

// GetGCSafePoint returns the cluster's GC safe point. (G20)
func (p *pdServer) GetGCSafePoint(ctx context.Context, req *pdpb.GetGCSafePointRequest) (*pdpb.GetGCSafePointResponse, error) {
	if err := p.check(req.GetHeader()); err != nil {
		return nil, err
	}
	return &pdpb.GetGCSafePointResponse{Header: p.header(), SafePoint: p.gcSafePoint()}, nil
}

// UpdateGCSafePoint raises the GC safe point (never lowers it), bounded by
// the smallest service safe point, and has the fake TiKV collect at once.
// It answers the safe point now in force. (G25)
func (p *pdServer) UpdateGCSafePoint(ctx context.Context, req *pdpb.UpdateGCSafePointRequest) (*pdpb.UpdateGCSafePointResponse, error) {
	if err := p.check(req.GetHeader()); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.s.c.NowMs()
	p.gc.observeGC(p.gcSafePoint())
	target := p.gc.clampGC(req.GetSafePoint(), now)
	if target > p.gcSafePoint() {
		p.s.c.GC(target)
	}
	sp := p.gcSafePoint()
	p.gc.observeGC(sp)
	return &pdpb.UpdateGCSafePointResponse{Header: p.header(), NewSafePoint: sp}, nil
}

// UpdateServiceGCSafePoint sets, refreshes or (ttl <= 0) removes a service
// safe point and answers the minimum over all services. (G21-G24)
func (p *pdServer) UpdateServiceGCSafePoint(ctx context.Context, req *pdpb.UpdateServiceGCSafePointRequest) (*pdpb.UpdateServiceGCSafePointResponse, error) {
	if err := p.check(req.GetHeader()); err != nil {
		return nil, err
	}
	id := string(req.GetServiceId())
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "service id is empty")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gc.observeGC(p.gcSafePoint())
	if id == gcWorkerService && req.GetTTL() > 0 {
		// TiDB's GC worker announces its progress here; it is the same
		// thing as the GC safe point in this fake.
		p.gc.observeGC(req.GetSafePoint())
	}
	min := p.gc.update(id, req.GetTTL(), req.GetSafePoint(), p.s.c.NowMs())
	if err := p.saveServices(); err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return &pdpb.UpdateServiceGCSafePointResponse{Header: p.header(), ServiceId: req.GetServiceId(), TTL: req.GetTTL(), MinSafePoint: min}, nil
}

// GetGCState is the GC states API of PD 9.x that client-go's KVStore reads
// at start: txn and GC safe point are the cluster's GC safe point, and the
// service safe points are listed as barriers. (G26)
func (p *pdServer) GetGCState(ctx context.Context, req *pdpb.GetGCStateRequest) (*pdpb.GetGCStateResponse, error) {
	if err := p.check(req.GetHeader()); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	sp := p.gcSafePoint()
	p.gc.observeGC(sp)
	st := &pdpb.GCState{KeyspaceScope: req.GetKeyspaceScope(), TxnSafePoint: sp, GcSafePoint: sp}
	now := p.s.c.NowMs()
	for _, s := range p.gc.list(now) {
		if s.ID == gcWorkerService {
			continue
		}
		ttl := int64(-1)
		if s.ExpireMs != 1<<63-1 {
			ttl = (s.ExpireMs - now + 999) / 1000
		}
		st.GcBarriers = append(st.GcBarriers, &pdpb.GCBarrierInfo{BarrierId: s.ID, BarrierTs: s.SafePoint, TtlSeconds: ttl})
	}
	return &pdpb.GetGCStateResponse{Header: p.header(), GcState: st}, nil
}

func itoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}

// QueryRegion is the batched region lookup stream the PD client's router
// uses by default: each request carries keys, previous-region keys and
// ids; the answer maps each key (and prev key) to a region id, in request
// order (0 when there is none), and lists those regions by id. (G16)
func (p *pdServer) QueryRegion(stream pdpb.PD_QueryRegionServer) error {
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := p.check(req.GetHeader()); err != nil {
			return err
		}
		if err := stream.Send(p.queryRegion(req)); err != nil {
			return err
		}
	}
}

func (p *pdServer) queryRegion(req *pdpb.QueryRegionRequest) *pdpb.QueryRegionResponse {
	var all []topology.Region // loaded only for prev keys
	up := p.upStores()
	resp := &pdpb.QueryRegionResponse{Header: p.header(), RegionsById: map[uint64]*pdpb.RegionResponse{}}
	add := func(r *topology.Region) uint64 {
		if _, ok := resp.RegionsById[r.ID]; !ok {
			resp.RegionsById[r.ID] = &pdpb.RegionResponse{Region: r.Meta(), Leader: leaderPeer(r), DownPeers: p.downPeers(r, up)}
		}
		return r.ID
	}
	locate := func(k []byte) int {
		for i := range all {
			if all[i].Contains(k) {
				return i
			}
		}
		return -1
	}
	for _, k := range req.GetKeys() {
		id := uint64(0)
		if r, ok := p.regionAt(k); ok {
			id = add(&r)
		}
		resp.KeyIdMap = append(resp.KeyIdMap, id)
	}
	if len(req.GetPrevKeys()) > 0 {
		all = p.s.c.Regions()
	}
	for _, k := range req.GetPrevKeys() {
		id := uint64(0)
		if i := locate(k); i > 0 {
			id = add(&all[i-1])
		}
		resp.PrevKeyIdMap = append(resp.PrevKeyIdMap, id)
	}
	for _, id := range req.GetIds() {
		if r, ok := p.s.c.Region(id); ok {
			add(&r)
		}
	}
	return resp
}
