package pd

import (
	"context"
	"fmt"

	"github.com/pingcap/kvproto/pkg/metapb"
	"github.com/tikv/client-go/v2/kv"
	"github.com/tikv/client-go/v2/tikv"

	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/logpuller"
)

// regionBatchLimit caps the regions loaded per LocateSpan call; the
// transport asks again for what is left.
const regionBatchLimit = 1024

// RegionLocator is the logpuller.RegionLocator over client-go's region
// cache built on the PLAIN PD client, so region boundaries stay comparable
// (EncodeBytes) keys, the form CDC spans and ChangeDataRequest keys use
// (facts §4; P8). A region cache inside a client-go KVStore decodes
// boundaries to raw keys and must not be used here.
type RegionLocator struct {
	cache      *tikv.RegionCache
	maxSleepMs int
}

// NewRegionLocator builds a region cache on c's plain PD client. Close it
// when done.
func NewRegionLocator(c *Client) *RegionLocator {
	return &RegionLocator{cache: tikv.NewRegionCache(c.pd), maxSleepMs: 5000}
}

// Close stops the cache's background goroutines.
func (l *RegionLocator) Close() { l.cache.Close() }

var _ logpuller.RegionLocator = (*RegionLocator)(nil)

// regionToken is what the locator keeps in RegionInfo.Token.
type regionToken struct {
	ver          tikv.RegionVerID
	updateLeader func(*metapb.Peer)
}

// LocateSpan loads the regions of span from PD through the cache and
// resolves each one's leader address (P8). A region whose cached entry is
// stale comes back with no leader: the transport drops it and asks again.
func (l *RegionLocator) LocateSpan(ctx context.Context, span kvevent.Span) ([]logpuller.RegionInfo, error) {
	bo := tikv.NewBackoffer(ctx, l.maxSleepMs)
	regions, err := l.cache.BatchLoadRegionsWithKeyRange(bo, span.StartKey, span.EndKey, regionBatchLimit)
	if err != nil {
		return nil, fmt.Errorf("pd: load regions of [%x, %x): %w", span.StartKey, span.EndKey, err)
	}
	out := make([]logpuller.RegionInfo, 0, len(regions))
	for _, r := range regions {
		ver := r.VerID()
		info := logpuller.RegionInfo{
			ID:       r.GetID(),
			Epoch:    &metapb.RegionEpoch{ConfVer: ver.GetConfVer(), Version: ver.GetVer()},
			StartKey: r.StartKey(),
			EndKey:   r.EndKey(),
		}
		tok := &regionToken{ver: ver}
		info.Token = tok
		rpcCtx, err := l.cache.GetTiKVRPCContext(bo, ver, kv.ReplicaReadLeader, 0)
		if err == nil && rpcCtx != nil && rpcCtx.Peer != nil {
			info.LeaderStoreID = rpcCtx.Peer.StoreId
			info.LeaderAddr = rpcCtx.Addr
			if rpcCtx.Meta != nil && rpcCtx.Meta.RegionEpoch != nil {
				info.Epoch = &metapb.RegionEpoch{ConfVer: rpcCtx.Meta.RegionEpoch.ConfVer, Version: rpcCtx.Meta.RegionEpoch.Version}
			}
			idx := rpcCtx.AccessIdx
			cache := l.cache
			tok.updateLeader = func(p *metapb.Peer) { cache.UpdateLeader(ver, p, idx) }
		}
		out = append(out, info)
	}
	return out, nil
}

// UpdateLeader follows a not_leader error: a named leader is recorded in
// the cache, an unknown one drops the region so it is reloaded (P9).
func (l *RegionLocator) UpdateLeader(region logpuller.RegionInfo, leader *metapb.Peer) {
	tok, ok := region.Token.(*regionToken)
	if !ok {
		return
	}
	if leader == nil || leader.StoreId == 0 || tok.updateLeader == nil {
		l.cache.InvalidateCachedRegion(tok.ver)
		return
	}
	tok.updateLeader(leader)
}

// Invalidate drops the cached region (epoch_not_match, region_not_found,
// failed stream) so the next lookup asks PD (P9).
func (l *RegionLocator) Invalidate(region logpuller.RegionInfo) {
	if tok, ok := region.Token.(*regionToken); ok {
		l.cache.InvalidateCachedRegion(tok.ver)
	}
}
