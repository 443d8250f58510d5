package pd

import (
	"context"
	"fmt"
	"time"

	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/logpuller"
)

// Upstream bundles what the adapter needs from a TiDB cluster: the PD
// client (TSO clock, GC), the CDC region locator (plain PD client,
// comparable keys) and client-go's KV store (snapshot reads, lock
// resolution; raw keys). It is the one place that wires them together for
// the gRPC KV source.
type Upstream struct {
	PD      *Client
	Locator *RegionLocator
	KV      *KVStore
}

var (
	_ kvevent.Clock          = (*Client)(nil)
	_ kvevent.SnapshotReader = (*KVStore)(nil)
)

// OpenUpstream connects to PD and opens the locator and the KV store.
func OpenUpstream(ctx context.Context, cfg Config) (*Upstream, error) {
	cli, err := Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	kv, err := OpenKVStore(cli)
	if err != nil {
		cli.Close()
		return nil, err
	}
	return &Upstream{PD: cli, Locator: NewRegionLocator(cli), KV: kv}, nil
}

// NewSource returns the gRPC KV source over this cluster. Fields of cfg
// that are already set are kept; cluster id, locator, lock resolver, clock
// and the GC check of start ts are filled in.
func (u *Upstream) NewSource(cfg logpuller.TransportConfig) (*logpuller.GRPCSource, error) {
	if cfg.ClusterID == 0 {
		cfg.ClusterID = u.PD.ClusterID()
	}
	if cfg.Locator == nil {
		cfg.Locator = u.Locator
	}
	if cfg.Resolver == nil {
		cfg.Resolver = u.KV
	}
	if cfg.Clock == nil {
		cfg.Clock = u.PD
	}
	if cfg.TLS == nil {
		cfg.TLS = u.PD.tlsConfig // P20: the change-data streams use PD's TLS
	}
	if cfg.CheckStartTs == nil {
		cfg.CheckStartTs = func(ctx context.Context, ts uint64) error { return CheckStartTs(ctx, u.PD.PD(), ts) }
	}
	src, err := logpuller.NewGRPCSource(cfg)
	if err != nil {
		return nil, fmt.Errorf("pd: gRPC source: %w", err)
	}
	return src, nil
}

// Close closes the KV store, the locator and the PD client.
func (u *Upstream) Close() error {
	err := u.KV.Close()
	u.Locator.Close()
	u.PD.Close()
	if err != nil {
		return fmt.Errorf("pd: close upstream: %w", err)
	}
	return nil
}

// HoldGC registers the adapter's service GC safe point at startTs − 1
// (failing with ErrStartTsBeforeGC when GC already passed it). The caller
// reports checkpoints with Advance and runs the keeper's Run loop, which
// renews the hold and removes it on a clean stop (P4-P7).
func (u *Upstream) HoldGC(ctx context.Context, cfg ServiceSafePointConfig, startTs uint64) (*ServiceSafePoint, error) {
	k, err := NewServiceSafePoint(u.PD.PD(), cfg)
	if err != nil {
		return nil, err
	}
	if err := k.Register(ctx, startTs, time.Now().UnixMilli()); err != nil {
		return nil, err
	}
	return k, nil
}
