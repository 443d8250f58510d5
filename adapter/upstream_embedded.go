package adapter

// The embedded upstream: the fake cluster with its SQL front, read in
// process (ModeInProcess) or over its PD and TiKV gRPC servers on
// loopback (ModeWire).

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/cdcfeed"
	"github.com/searchfabric/sfemu/fakeupstream/grpcserver"
	"github.com/searchfabric/sfemu/fakeupstream/sqlfront"
	"github.com/searchfabric/sfemu/upstream/logpuller"
	"github.com/searchfabric/sfemu/upstream/pd"
)

// UpstreamConfig configures NewUpstream.
type UpstreamConfig struct {
	Seed int64
	// RealClock runs TSO and resolved-ts ticks on the wall clock (the demo
	// and the end-to-end tests); otherwise time is virtual.
	RealClock bool
	// ResolvedTsInterval is the time between resolved-ts rounds (TiKV's
	// min-ts-interval). Default 50 ms: short, so safe_ts follows writes
	// closely in the demo.
	ResolvedTsInterval time.Duration
	// Wire starts the cluster's PD and TiKV gRPC servers on loopback and
	// reads through them (ModeWire) instead of in process.
	Wire bool
	// Stores is the number of TiKV stores of the embedded cluster
	// (default: the cluster's default, 3).
	Stores int
	// Servers tunes the gRPC servers (ModeWire); Servers.TLS makes them
	// serve TLS, and then Security is what the clients connect with.
	Servers grpcserver.Config
	// Security is the clients' TLS (ModeWire), as ConnectUpstreamSecure's.
	Security pd.Security
	// Transport tunes the gRPC sources (ModeWire).
	Transport logpuller.TransportConfig
	// Dir, when set, makes the embedded cluster durable
	// (fakeupstream.Config.Dir): its committed state and TSO survive the
	// process, and NewUpstream on the same Dir reopens them (the SQL front
	// rebuilds its catalog from the meta, S17). A Dir another process (or
	// Upstream) holds fails with kvlog.ErrLocked. Empty: in memory.
	Dir string
	// Maintain tunes the durable cluster's background GC and compaction
	// (fakeupstream.Config.Maintain; zero: the defaults).
	Maintain fakeupstream.MaintainConfig
}

// NewUpstream starts the embedded cluster (empty, or reopened from
// cfg.Dir) with its SQL front and, with cfg.Wire, its gRPC servers on
// loopback and the PD client, locator and KV store connected to them.
// Close releases what it started.
func NewUpstream(ctx context.Context, cfg UpstreamConfig) (*Upstream, error) {
	iv := cfg.ResolvedTsInterval
	if iv <= 0 {
		iv = 50 * time.Millisecond
	}
	c, err := fakeupstream.New(fakeupstream.Config{
		Seed: cfg.Seed, RealClock: cfg.RealClock, Stores: cfg.Stores, Dir: cfg.Dir, Maintain: cfg.Maintain,
		Feed: cdcfeed.Config{ResolvedTsIntervalMs: iv.Milliseconds()},
	})
	if err != nil {
		return nil, err
	}
	srv, err := sqlfront.New(ctx, c)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	u := &Upstream{Cluster: c, SQL: srv, mode: ModeInProcess}
	if !cfg.Wire {
		return u, nil
	}
	if cfg.Dir != "" && cfg.RealClock && cfg.Servers.GCLifeTime == 0 {
		// A durable embedded upstream on the wall clock collects garbage
		// as TiDB's GC worker would, never past the adapter's service
		// safe point (grpcserver G28), so its log and memory stay bounded.
		cfg.Servers.GCLifeTime = grpcserver.DefaultGCLifeTime
	}
	s, err := grpcserver.Start(c, cfg.Servers)
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("adapter: starting the embedded gRPC servers: %w", err)
	}
	u.Servers, u.mode, u.endpoints, u.Transport = s, ModeWire, []string{s.PDAddr()}, cfg.Transport
	octx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	p, err := pd.OpenUpstream(octx, pd.Config{Endpoints: u.endpoints, Security: cfg.Security})
	for attempt := 1; err != nil && attempt < 3 && octx.Err() == nil && canceledByClient(err); attempt++ {
		// The PD client's first TSO can come back Canceled while its stream
		// is still being set up (seen under -race on a loaded machine),
		// although nothing here was cancelled: try again within the bound.
		time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
		p, err = pd.OpenUpstream(octx, pd.Config{Endpoints: u.endpoints, Security: cfg.Security})
	}
	if err != nil {
		s.Close()
		_ = c.Close()
		return nil, fmt.Errorf("adapter: connecting to the embedded PD at %s: %w", s.PDAddr(), err)
	}
	u.PD = p
	return u, nil
}

// canceledByClient matches the PD client's spurious "context canceled"
// (a context error of its own, possibly flattened into the message).
func canceledByClient(err error) bool {
	return errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "context canceled") || strings.Contains(err.Error(), "code = Canceled")
}
