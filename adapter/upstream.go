package adapter

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/searchfabric/sfemu/fakeupstream"
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

	sources sourceStats // the gRPC sources opened, for their counters

	closeOnce sync.Once
	closeErr  error
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
	return u.newSource(poll, logpuller.MatcherMemory{})
}

// newSource is NewSource whose matchers charge the adapter's memory quota
// and spill past it (specs/logpuller.md LP13-LP16).
func (u *Upstream) newSource(poll time.Duration, mm logpuller.MatcherMemory) (kvevent.Source, error) {
	if u.PD != nil {
		tc := u.Transport
		tc.Matcher = mm
		src, err := u.PD.NewSource(tc)
		if err != nil {
			return nil, err
		}
		u.sources.add(src)
		return src, nil
	}
	return u.Cluster.NewSource(fakeupstream.SourceConfig{PollInterval: poll, Matcher: mm}), nil
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
