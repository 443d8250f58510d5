package grpcserver

import (
	"context"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
)

// etcdCluster answers the one etcd call client-go makes at start:
// txnkv.NewClient builds an etcd client on the PD address (PD embeds etcd)
// and syncs its member list. The fake PD is its own single etcd member;
// nothing is stored in etcd (client-go reads the txn safe point through
// GetGCState instead). (G17)
type etcdCluster struct {
	etcdserverpb.UnimplementedClusterServer
	s *Servers
}

func (e *etcdCluster) MemberList(ctx context.Context, req *etcdserverpb.MemberListRequest) (*etcdserverpb.MemberListResponse, error) {
	return &etcdserverpb.MemberListResponse{
		Header: &etcdserverpb.ResponseHeader{ClusterId: e.s.cfg.ClusterID, MemberId: pdMemberID},
		Members: []*etcdserverpb.Member{{
			ID: pdMemberID, Name: "fake-pd-1", PeerURLs: []string{e.s.PDURL()}, ClientURLs: []string{e.s.PDURL()},
		}},
	}, nil
}
