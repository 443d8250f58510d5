package grpcserver

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/pingcap/kvproto/pkg/cdcpb"
	"github.com/pingcap/kvproto/pkg/pdpb"
	"github.com/pingcap/kvproto/pkg/tikvpb"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/searchfabric/sfemu/fakeupstream"
)

// DefaultClusterID is the PD cluster id the servers announce unless
// Config.ClusterID says otherwise.
const DefaultClusterID uint64 = 7_300_000_000_000_000_001

// Config tunes the servers. Zero fields take defaults.
type Config struct {
	// ClusterID announced by PD and checked in request headers
	// (default DefaultClusterID).
	ClusterID uint64
	// Host to listen on (default 127.0.0.1); ports are chosen at start.
	Host string
	// PollInterval is how long an idle change-data stream waits before it
	// steps the feed again (default 2ms). Writes reach the feed without a
	// wake-up call, so the streams poll.
	PollInterval time.Duration
	// MaxRecvMsgSize of the servers (default 256 MiB, what TiCDC uses).
	MaxRecvMsgSize int
	// TLS, when set, makes every server speak TLS (G60, tls.go).
	TLS *tls.Config
	// GCLifeTime, when positive, runs TiDB's GC worker: the cluster's
	// background GC moves the safe point to now − GCLifeTime, never past
	// a service safe point (G28; DefaultGCLifeTime is TiDB's default).
	// Zero: no GC but what clients ask for.
	GCLifeTime time.Duration
}

func (c *Config) fill() {
	if c.ClusterID == 0 {
		c.ClusterID = DefaultClusterID
	}
	if c.Host == "" {
		c.Host = "127.0.0.1"
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 2 * time.Millisecond
	}
	if c.MaxRecvMsgSize <= 0 {
		c.MaxRecvMsgSize = 256 << 20
	}
}

// Servers is a running set of PD and TiKV gRPC servers over one cluster.
type Servers struct {
	c      *fakeupstream.Cluster
	cfg    Config
	pd     *pdServer
	pdSrv  *grpcEndpoint
	stores map[uint64]*grpcEndpoint

	wakeMu sync.Mutex
	wakeCh chan struct{}

	unimplMu sync.Mutex
	unimpl   map[string]int

	closeOnce sync.Once
	done      chan struct{}
	wg        sync.WaitGroup
}

type grpcEndpoint struct {
	srv    *grpc.Server
	lis    net.Listener
	addr   string
	health *health.Server
}

// Start listens on fresh loopback ports: one for PD and one per store of
// the cluster, and serves until Close. (G1)
func Start(c *fakeupstream.Cluster, cfg Config) (*Servers, error) {
	cfg.fill()
	s := &Servers{c: c, cfg: cfg, stores: map[uint64]*grpcEndpoint{}, done: make(chan struct{}), unimpl: map[string]int{},
		wakeCh: make(chan struct{})}
	var err error
	// Listen everywhere first: PD answers GetStore with the store
	// addresses, so they must be known before anything is served.
	if s.pdSrv, err = s.listen(0); err != nil {
		return nil, err
	}
	for _, st := range c.Stores() {
		ep, err := s.listen(st.ID)
		if err != nil {
			s.closeListeners()
			return nil, err
		}
		s.stores[st.ID] = ep
	}
	if s.pd, err = newPDServer(s); err != nil {
		s.closeListeners()
		return nil, err
	}
	pdpb.RegisterPDServer(s.pdSrv.srv, s.pd)
	etcdserverpb.RegisterClusterServer(s.pdSrv.srv, &etcdCluster{s: s})
	for id, ep := range s.stores {
		kv := &tikvServer{s: s, storeID: id}
		tikvpb.RegisterTikvServer(ep.srv, kv)
		cdcpb.RegisterChangeDataServer(ep.srv, &cdcServer{s: s, storeID: id})
	}
	s.serve(s.pdSrv)
	for _, ep := range s.stores {
		s.serve(ep)
	}
	if cfg.GCLifeTime > 0 {
		c.SetGCPolicy(s.pd.gcPolicy(cfg.GCLifeTime))
	}
	return s, nil
}

// KeepalivePolicy lets clients ping as TiKV's clients do (TiCDC and
// client-go: every 10 s, with or without a stream). gRPC's default (one
// ping per 5 min, none without a stream) answers the third early ping on a
// connection that carried no data for 30 s with GOAWAY "too_many_pings":
// a store busy for that long (the fake's prewrite of a million keys holds
// its cluster lock for a minute) then broke every change-data stream.
func KeepalivePolicy() keepalive.EnforcementPolicy {
	return keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}
}

// listen opens one endpoint; store 0 is PD (standard health service),
// a store gets a health service that follows the topology.
func (s *Servers) listen(store uint64) (*grpcEndpoint, error) {
	lis, err := net.Listen("tcp", net.JoinHostPort(s.cfg.Host, "0"))
	if err != nil {
		return nil, fmt.Errorf("grpcserver: listen on %s: %w", s.cfg.Host, err)
	}
	srv := grpc.NewServer(append([]grpc.ServerOption{grpc.MaxRecvMsgSize(s.cfg.MaxRecvMsgSize), grpc.MaxSendMsgSize(s.cfg.MaxRecvMsgSize),
		grpc.UnaryInterceptor(s.unaryRecorder), grpc.StreamInterceptor(s.streamRecorder), grpc.KeepaliveEnforcementPolicy(KeepalivePolicy())}, s.cfg.serverOptions()...)...)
	ep := &grpcEndpoint{srv: srv, lis: lis, addr: lis.Addr().String()}
	if store == 0 {
		ep.health = health.NewServer()
		healthpb.RegisterHealthServer(srv, ep.health)
	} else {
		healthpb.RegisterHealthServer(srv, &storeHealth{s: s, storeID: store})
	}
	return ep, nil
}

func (s *Servers) serve(ep *grpcEndpoint) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		// Serve returns when Close stops the server; its error then is
		// expected and says nothing.
		_ = ep.srv.Serve(ep.lis)
	}()
}

func (s *Servers) closeListeners() {
	if s.pdSrv != nil {
		_ = s.pdSrv.lis.Close()
	}
	for _, ep := range s.stores {
		_ = ep.lis.Close()
	}
}

// Close stops every server: open streams end with codes.Unavailable, and
// Close returns after all serving goroutines have finished. (G2)
func (s *Servers) Close() {
	s.closeOnce.Do(func() {
		close(s.done)
		eps := []*grpcEndpoint{s.pdSrv}
		for _, ep := range s.stores {
			eps = append(eps, ep)
		}
		for _, ep := range eps {
			if ep.health != nil {
				ep.health.Shutdown()
			}
			ep.srv.Stop()
		}
		s.wg.Wait()
		if s.cfg.GCLifeTime > 0 {
			s.c.SetGCPolicy(nil)
		}
	})
}

// Cluster is the cluster behind the servers.
func (s *Servers) Cluster() *fakeupstream.Cluster { return s.c }

// ClusterID is the PD cluster id.
func (s *Servers) ClusterID() uint64 { return s.cfg.ClusterID }

// PDAddr is PD's host:port.
func (s *Servers) PDAddr() string { return s.pdSrv.addr }

// PDURL is PD's client URL (http://host:port, https:// with TLS), as
// listed in GetMembers.
func (s *Servers) PDURL() string { return s.cfg.urlScheme() + s.pdSrv.addr }

// StoreAddr is the host:port of store id's TiKV server ("" if unknown).
func (s *Servers) StoreAddr(id uint64) string {
	if ep, ok := s.stores[id]; ok {
		return ep.addr
	}
	return ""
}

// storeUp reports whether the topology has store id up.
func (s *Servers) storeUp(id uint64) bool {
	for _, st := range s.c.Stores() {
		if st.ID == id {
			return st.Up
		}
	}
	return false
}

// errStoreDown is the gRPC status a down store answers with: the process
// is gone, so the client sees the transport fail. (G30)
func errStoreDown(id uint64) error {
	return status.Errorf(codes.Unavailable, "fake tikv store %d is down", id)
}

// unaryRecorder notes every call answered Unimplemented, so tests can
// show which RPCs the real clients asked for that the fake does not
// serve. (G3)
func (s *Servers) unaryRecorder(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	resp, err := h(ctx, req)
	s.noteUnimplemented(info.FullMethod, err)
	return resp, err
}

func (s *Servers) streamRecorder(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	err := h(srv, ss)
	s.noteUnimplemented(info.FullMethod, err)
	return err
}

func (s *Servers) noteUnimplemented(method string, err error) {
	if status.Code(err) != codes.Unimplemented {
		return
	}
	s.unimplMu.Lock()
	s.unimpl[method]++
	s.unimplMu.Unlock()
}

// Unimplemented returns how often each RPC was answered Unimplemented
// (method name -> count).
func (s *Servers) Unimplemented() map[string]int {
	s.unimplMu.Lock()
	defer s.unimplMu.Unlock()
	out := make(map[string]int, len(s.unimpl))
	for k, v := range s.unimpl {
		out[k] = v
	}
	return out
}

// Wake makes every change-data stream step the feed now instead of at its
// next poll. Writers that want the lowest write-to-wire latency (the
// embedded driver, benchmarks) call it after a commit; without it a change
// waits at most Config.PollInterval. (G58)
func (s *Servers) Wake() {
	s.wakeMu.Lock()
	close(s.wakeCh)
	s.wakeCh = make(chan struct{})
	s.wakeMu.Unlock()
}

// wakeup returns the channel the next Wake closes.
func (s *Servers) wakeup() <-chan struct{} {
	s.wakeMu.Lock()
	defer s.wakeMu.Unlock()
	return s.wakeCh
}
