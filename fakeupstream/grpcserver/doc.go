// Package grpcserver puts the in-process fake cluster (fakeupstream.Cluster)
// behind real gRPC servers on loopback ports: one PD server (pdpb.PD) and
// one server per TiKV store (tikvpb.Tikv and cdcpb.ChangeData), so the real
// github.com/tikv/pd/client, client-go and a raw cdcpb client can talk to
// it exactly as they talk to a TiDB cluster.
//
// The protocol rules implemented here are numbered in
// specs/fakeupstream-grpc.md (G1..); tests cite them.
//
// The servers hold no data of their own: every answer is derived from the
// cluster at the moment of the call (regions, stores, MVCC, TSO, CDC feed),
// except the PD service GC safe points, which live in a small table here
// (gcSafePoints) with TTLs measured on the cluster clock.
package grpcserver
