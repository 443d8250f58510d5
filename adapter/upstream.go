package adapter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/cdcfeed"
	"github.com/searchfabric/sfemu/fakeupstream/grpcserver"
	"github.com/searchfabric/sfemu/fakeupstream/sqlfront"
	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/logpuller"
	"github.com/searchfabric/sfemu/upstream/pd"
)

// Mode says which kind of upstream the adapter reads from.
type Mode int

const (
	// ModeInProcess: the embedded cluster read in process (fakeupstream
	// Source, the cluster's own TSO and snapshot reads). Deterministic
	// tests use it.
	ModeInProcess Mode = iota
	// ModeWire: the embedded cluster behind its PD and TiKV gRPC servers on
	// loopback; the adapter reads through the real PD client, client-go and
	// the EventFeed log puller: the same code as against a real cluster.
	ModeWire
	// ModeReal: a real TiDB cluster reached through PD. There is no
	// embedded cluster and no SQL front.
	ModeReal
)

func (m Mode) String() string {
	switch m {
	case ModeInProcess:
		return "in-process"
	case ModeWire:
		return "embedded-grpc"
	case ModeReal:
		return "real-cluster"
	default:
		return fmt.Sprintf("mode(%d)", int(m))
	}
}

// Upstream is what the adapter reads from: a clock (TSO), a snapshot
// reader (meta keys and table rows at a ts) and KV sources (the schema
// store's and the tables'). Three kinds exist (Mode): the embedded cluster
// in process, the embedded cluster over gRPC, and a real cluster.
type Upstream struct {
	// Cluster is the embedded cluster (fault injection, direct writes);
	// nil in real-cluster mode.
	Cluster *fakeupstream.Cluster
	// SQL is the embedded cluster's SQL front; nil in real-cluster mode.
	SQL *sqlfront.Server
	// Servers are the embedded cluster's PD and TiKV gRPC servers
	// (ModeWire only).
	Servers *grpcserver.Servers
	// PD is the PD client, region locator and client-go KV store
	// (ModeWire and ModeReal).
	PD *pd.Upstream
	// Transport is the template of the gRPC sources' config (ModeWire and
	// ModeReal); set it before starting an adapter. The fields
	// pd.Upstream.NewSource fills (cluster id, locator, resolver, clock,
	// GC check) are filled there.
	Transport logpuller.TransportConfig

	mode      Mode
	endpoints []string

	closeOnce sync.Once
	closeErr  error
}

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
	// Servers tunes the gRPC servers (ModeWire).
	Servers grpcserver.Config
	// Transport tunes the gRPC sources (ModeWire).
	Transport logpuller.TransportConfig
	// Dir, when set, makes the embedded cluster durable
	// (fakeupstream.Config.Dir): its committed state and TSO survive the
	// process, and NewUpstream on the same Dir reopens them (the SQL front
	// rebuilds its catalog from the meta, S17). A Dir another process (or
	// Upstream) holds fails with kvlog.ErrLocked. Empty: in memory.
	Dir string
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
		Seed: cfg.Seed, RealClock: cfg.RealClock, Stores: cfg.Stores, Dir: cfg.Dir,
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
	s, err := grpcserver.Start(c, cfg.Servers)
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("adapter: starting the embedded gRPC servers: %w", err)
	}
	u.Servers, u.mode, u.endpoints, u.Transport = s, ModeWire, []string{s.PDAddr()}, cfg.Transport
	octx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	p, err := pd.OpenUpstream(octx, pd.Config{Endpoints: u.endpoints})
	for attempt := 1; err != nil && attempt < 3 && octx.Err() == nil && canceledByClient(err); attempt++ {
		// The PD client's first TSO can come back Canceled while its stream
		// is still being set up (seen under -race on a loaded machine),
		// although nothing here was cancelled: try again within the bound.
		time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
		p, err = pd.OpenUpstream(octx, pd.Config{Endpoints: u.endpoints})
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

// DefaultConnectTimeout bounds ConnectUpstream's attempt to reach PD (a
// shorter deadline of ctx wins).
const DefaultConnectTimeout = 15 * time.Second

// ConnectUpstream connects to a real cluster's PD (addresses host:port or
// http://host:port): ModeReal. Reaching PD is bounded by
// DefaultConnectTimeout (or ctx's earlier deadline); the error names the
// addresses. There is no embedded cluster and no SQL front: tables are
// resolved through the meta keys at the start ts.
func ConnectUpstream(ctx context.Context, pdAddrs []string) (*Upstream, error) {
	var eps []string
	for _, a := range pdAddrs {
		if a = strings.TrimSpace(a); a != "" {
			eps = append(eps, a)
		}
	}
	if len(eps) == 0 {
		return nil, errors.New("adapter: no PD address given")
	}
	began := time.Now()
	octx, cancel := context.WithTimeout(ctx, DefaultConnectTimeout)
	defer cancel()
	p, err := pd.OpenUpstream(octx, pd.Config{Endpoints: eps})
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return nil, fmt.Errorf("adapter: PD at %s unreachable (gave up after %v): %w", strings.Join(eps, ","), time.Since(began).Round(time.Millisecond), err)
		}
		return nil, fmt.Errorf("adapter: connecting to PD at %s: %w", strings.Join(eps, ","), err)
	}
	// A first TSO proves the connection works (the client may return
	// before it reached a leader).
	if _, err := p.PD.CurrentTs(octx); err != nil {
		_ = p.Close()
		return nil, fmt.Errorf("adapter: PD at %s: first TSO: %w", strings.Join(eps, ","), err)
	}
	return &Upstream{PD: p, mode: ModeReal, endpoints: eps}, nil
}

// Mode is the kind of upstream.
func (u *Upstream) Mode() Mode { return u.mode }

// PDAddrs are the PD addresses the adapter uses (nil in process).
func (u *Upstream) PDAddrs() []string { return append([]string(nil), u.endpoints...) }

// Clock is the TSO the adapter uses: PD's over gRPC, or the embedded
// cluster's in process.
func (u *Upstream) Clock() kvevent.Clock {
	if u.PD != nil {
		return u.PD.PD
	}
	return u.Cluster
}

// Snapshot reads keys at a ts: client-go's snapshot over gRPC, or the
// embedded cluster's MVCC in process.
func (u *Upstream) Snapshot() kvevent.SnapshotReader {
	if u.PD != nil {
		return u.PD.KV
	}
	return u.Cluster
}

// CurrentTs is a fresh ts from the upstream's clock.
func (u *Upstream) CurrentTs(ctx context.Context) (uint64, error) { return u.Clock().CurrentTs(ctx) }

// NewSource returns a new KV source: the EventFeed log puller over gRPC,
// or the embedded cluster's in-process source (poll is its pump interval).
func (u *Upstream) NewSource(poll time.Duration) (kvevent.Source, error) {
	if u.PD != nil {
		return u.PD.NewSource(u.Transport)
	}
	return u.Cluster.NewSource(fakeupstream.SourceConfig{PollInterval: poll}), nil
}

// Close closes the PD client side, then the gRPC servers, then the
// embedded cluster (a durable one syncs its log and releases its Dir; in
// memory that is a no-op). Close the adapters reading the upstream first.
// Idempotent.
func (u *Upstream) Close() error {
	u.closeOnce.Do(func() {
		if u.PD != nil {
			u.closeErr = u.PD.Close()
		}
		if u.Servers != nil {
			u.Servers.Close()
		}
		if u.Cluster != nil {
			if err := u.Cluster.Close(); u.closeErr == nil {
				u.closeErr = err
			}
		}
	})
	return u.closeErr
}
