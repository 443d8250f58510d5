package fakeupstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/pingcap/kvproto/pkg/cdcpb"
	"github.com/pingcap/kvproto/pkg/metapb"

	"github.com/searchfabric/sfemu/fakeupstream/cdcfeed"
	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/logpuller"
)

// ClientVersion is the ticdc_version the in-process client announces.
const ClientVersion = logpuller.ClientVersion

// Source is the in-process kvevent.Source: the project's one subscription
// driver (upstream/logpuller.Driver: subscriptions, region assignment from
// the cores' holes, retries, resolved-ts fan-out) over a thin transport,
// the fake cluster's CDC feed. The driver opens one stream per store shared
// by all spans (stream multiplexing, one request id per span); this file
// only opens feed streams, locates regions in the current topology and
// moves messages from the feed to the driver.
//
// Deliveries happen inside Pump (tests call it after stepping the cluster)
// or inside Run (a loop that pumps on an interval, for the demo). Consumers
// are called synchronously from there; they may call Subscribe.
type Source struct {
	c        *Cluster
	interval time.Duration
	drv      *logpuller.Driver

	mu     sync.Mutex
	conns  map[uint64]*feedConn // open feed streams by store
	fatal  error
	closed bool
}

// SourceConfig tunes a Source.
type SourceConfig struct {
	// PollInterval is Run's pause between pumps (default 5ms).
	PollInterval time.Duration
	// Matcher is the memory quota and prewrite spill store of the
	// driver's matchers (specs/logpuller.md LP13-LP16).
	Matcher logpuller.MatcherMemory
}

// NewSource returns a Source reading from c.
func (c *Cluster) NewSource(cfg SourceConfig) *Source {
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 5 * time.Millisecond
	}
	s := &Source{c: c, interval: cfg.PollInterval, conns: map[uint64]*feedConn{}}
	drv, err := logpuller.NewDriver(logpuller.DriverConfig{
		Name:    "fakeupstream",
		Locator: topologyLocator{c},
		Dialer:  feedDialer{s},
		// Every failed region and stream is retried on the next pump
		// round (SRC-1); the cluster's clock is the driver's clock.
		NoBackoff: true,
		Now:       func() time.Time { return time.UnixMilli(c.NowMs()) },
		// The topology is never stale (see DriverConfig.WholeRegions).
		WholeRegions: true,
		Matcher:      cfg.Matcher,
	})
	if err != nil {
		panic(err) // both seams are set above: unreachable
	}
	s.drv = drv
	return s
}

var _ kvevent.Source = (*Source)(nil)

// ErrStartTsBeforeGC: the subscription would start below the GC safe
// point, where the incremental scan can no longer see every change.
var ErrStartTsBeforeGC = errors.New("start ts is below the GC safe point")

// Subscribe implements kvevent.Source. The span is comparable. Cancelling
// ctx ends the subscription (its regions are deregistered on the next
// pump).
func (s *Source) Subscribe(ctx context.Context, subID uint64, span kvevent.Span, startTs uint64, c kvevent.Consumer) error {
	if sp, _ := s.c.GCSafePoint(context.Background()); startTs < sp {
		return fmt.Errorf("fakeupstream: subscribe %d at start ts %d, GC safe point %d: %w", subID, startTs, sp, ErrStartTsBeforeGC)
	}
	return s.drv.Subscribe(ctx, subID, span, startTs, c)
}

// Run pumps until ctx ends (nil) or a fatal protocol error (returned).
// With a wall-clock cluster it also drives resolved-ts ticks.
func (s *Source) Run(ctx context.Context) error {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		if err := s.Pump(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Close closes every stream.
func (s *Source) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.drv.CloseStreams()
	return nil
}

// Pump runs the cluster's resolved-ts tick if due, then subscribes holes,
// delivers everything the feed has ready and hands it to the driver, until
// nothing moves. It returns the first fatal error (and keeps returning it).
func (s *Source) Pump() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fatal != nil {
		return s.fatal
	}
	if s.closed {
		return errors.New("fakeupstream: source closed")
	}
	s.c.Tick()
	for round := 0; round < 10000; round++ {
		s.drv.Adopt()
		s.drv.DropCancelled()
		s.drv.SubscribeHoles(context.Background())
		s.c.DeliverAll()
		moved, err := s.drain()
		if err != nil {
			s.fatal = err
			return err
		}
		if !moved {
			return nil
		}
	}
	return nil
}

// drain hands every received message to the driver, store by store in id
// order (deterministic). It reports whether anything arrived.
func (s *Source) drain() (bool, error) {
	moved := false
	stores := make([]uint64, 0, len(s.conns))
	for id := range s.conns {
		stores = append(stores, id)
	}
	slices.Sort(stores)
	for _, id := range stores {
		fc := s.conns[id]
		if fc == nil {
			continue
		}
		msgs, err := fc.fs.Recv()
		if err != nil {
			s.drv.FailStream(fc.ds, err)
			moved = true
			continue
		}
		for _, m := range msgs {
			moved = true
			if err := s.drv.HandleEvent(fc.ds, m); err != nil {
				return true, err
			}
		}
	}
	return moved, nil
}

// SpanStats returns the puller counters of subscription subID (for tests
// and metrics).
func (s *Source) SpanStats(subID uint64) (logpuller.Stats, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.drv.SpanStats(subID)
}

// feedDialer opens the driver's streams on the cluster's feed.
type feedDialer struct{ s *Source }

func (d feedDialer) Open(ds *logpuller.Stream) (logpuller.StreamConn, error) {
	fs, err := d.s.c.OpenStream(ds.StoreID)
	if err != nil {
		return nil, err
	}
	fc := &feedConn{s: d.s, ds: ds, fs: fs}
	d.s.conns[ds.StoreID] = fc
	return fc, nil
}

// feedConn is one open feed stream.
type feedConn struct {
	s  *Source
	ds *logpuller.Stream
	fs *cdcfeed.Stream
}

func (fc *feedConn) Send(req *cdcpb.ChangeDataRequest) error { return fc.fs.Send(req) }

func (fc *feedConn) Close() {
	fc.fs.Close()
	if fc.s.conns[fc.ds.StoreID] == fc {
		delete(fc.s.conns, fc.ds.StoreID)
	}
}

// topologyLocator finds regions in the cluster's current topology. It is
// never stale, so there is no cache to correct.
type topologyLocator struct{ c *Cluster }

func (l topologyLocator) LocateSpan(_ context.Context, span kvevent.Span) ([]logpuller.RegionInfo, error) {
	rs := l.c.RegionsInSpan(span)
	out := make([]logpuller.RegionInfo, 0, len(rs))
	for _, r := range rs {
		info := logpuller.RegionInfo{ID: r.ID, Epoch: r.Epoch(), StartKey: r.StartKey, EndKey: r.EndKey, LeaderStoreID: r.Leader}
		if r.Leader != 0 {
			info.LeaderAddr = storeAddr(r.Leader)
		}
		out = append(out, info)
	}
	return out, nil
}

func (topologyLocator) UpdateLeader(logpuller.RegionInfo, *metapb.Peer) {}
func (topologyLocator) Invalidate(logpuller.RegionInfo)                 {}

// storeAddr names an in-process store for the driver's stream keys.
func storeAddr(id uint64) string { return "inproc-store-" + strconv.FormatUint(id, 10) }
