package logpuller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pingcap/kvproto/pkg/cdcpb"
	"google.golang.org/grpc"

	"github.com/searchfabric/sfemu/upstream/kvevent"
)

// GRPCSource is the real kvevent.Source: the gRPC transport of the
// subscription Driver, speaking TiKV's ChangeData protocol. One goroutine
// (Run) owns the driver, hence every span's puller core and all
// bookkeeping; each open stream has a sender and a receiver goroutine that
// only move messages between gRPC and Run. Consumers are therefore called
// from Run's goroutine, one call at a time (the core is not concurrent),
// and may call Subscribe.
//
// Streams: with EventFeedV2 one stream per store carries every span's
// regions (stream multiplexing; the span's request id routes events and
// batched resolved ts). When a store answers V2 with Unimplemented the
// store is switched to v1 EventFeed, where one stream per (span, store)
// carries that span's regions, each region once with a fresh request id;
// closing that stream is the only way to drop them. Rules: specs/logpuller.md
// (T1..).
type GRPCSource struct {
	cfg TransportConfig
	drv *Driver

	wake   chan struct{}
	events chan streamMsg
	// queue bounds and charges the heap of the events in events and in
	// Run's hands (LP19).
	queue eventQueue

	connMu sync.Mutex
	conns  map[string]*grpc.ClientConn
	closed bool

	// Owned by Run.
	baseCtx     context.Context
	baseCancel  context.CancelFunc
	wg          sync.WaitGroup
	resolvedCh  chan StuckTask
	tsoCh       chan stuckSample
	tsoInFlight bool
	regions     regionBoard // copies for RegionStats (stats.go)
}

// grpcStream is the gRPC side of one driver Stream: a send queue drained
// by the stream's sender goroutine.
type grpcStream struct {
	ds     *Stream
	ctx    context.Context
	cancel context.CancelFunc

	sendMu   sync.Mutex
	sendQ    []*cdcpb.ChangeDataRequest
	sendWake chan struct{}
}

type streamMsg struct {
	st  *Stream
	ev  *cdcpb.ChangeDataEvent
	err error
	// bytes is ev's heap, admitted to the event queue, charged the part
	// of it charged to the memory quota (LP19).
	bytes, charged int64
}

// NewGRPCSource returns a source using cfg. Nothing is dialled before Run.
func NewGRPCSource(cfg TransportConfig) (*GRPCSource, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	s := &GRPCSource{
		cfg:        cfg,
		wake:       make(chan struct{}, 1),
		events:     make(chan streamMsg, 256),
		conns:      map[string]*grpc.ClientConn{},
		resolvedCh: make(chan StuckTask, 64),
		tsoCh:      make(chan stuckSample, 1),
		queue:      eventQueue{limit: cfg.EventQueueBytes, quota: cfg.Matcher.Memory},
	}
	drv, err := NewDriver(DriverConfig{
		Name:                  "logpuller",
		ClusterID:             cfg.ClusterID,
		Locator:               cfg.Locator,
		Dialer:                grpcDialer{s},
		Now:                   cfg.Now,
		LocateTimeout:         cfg.DialTimeout,
		StoreReconnectBackoff: cfg.StoreReconnectBackoff,
		RegionRetryInterval:   cfg.RegionRetryInterval,
		BusyBackoff:           cfg.BusyBackoff,
		MatcherQuota:          cfg.MatcherQuota,
		Matcher:               cfg.Matcher,
		DisableV2:             cfg.DisableV2,
	})
	if err != nil {
		return nil, err
	}
	s.drv = drv
	return s, nil
}

var _ kvevent.Source = (*GRPCSource)(nil)

// Subscribe implements kvevent.Source. Cancelling ctx ends the
// subscription: V2 streams get a Deregister, v1 streams of the span are
// closed (T9).
func (s *GRPCSource) Subscribe(ctx context.Context, subID uint64, span kvevent.Span, startTs uint64, c kvevent.Consumer) error {
	if s.cfg.CheckStartTs != nil {
		if err := s.cfg.CheckStartTs(ctx, startTs); err != nil {
			return fmt.Errorf("logpuller: subscribe %d: %w", subID, err)
		}
	}
	if err := s.drv.Subscribe(ctx, subID, span, startTs, c); err != nil {
		return err
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return nil
}

// Stats returns a copy of the transport counters.
func (s *GRPCSource) Stats() TransportStatsSnapshot { return s.drv.Stats() }

// Run drives every subscription until ctx ends (nil) or the core reports a
// fatal protocol error (returned). On return every stream is closed and
// every goroutine the source started has ended.
func (s *GRPCSource) Run(ctx context.Context) error {
	s.baseCtx, s.baseCancel = context.WithCancel(ctx)
	defer s.shutdown()
	retry := time.NewTicker(s.cfg.RegionRetryInterval)
	defer retry.Stop()
	var resolveC <-chan time.Time
	if s.cfg.Resolver != nil && s.cfg.Clock != nil {
		t := time.NewTicker(s.cfg.ResolveLockInterval)
		defer t.Stop()
		resolveC = t.C
	}
	for {
		s.drv.Adopt()
		s.drv.DropCancelled()
		if s.drv.Dirty() {
			s.drv.SubscribeHoles(s.baseCtx)
		}
		s.regions.publish(s.drv, s.cfg.Now())
		select {
		case <-ctx.Done():
			return nil
		case m := <-s.events:
			if err := s.handleMsg(m); err != nil {
				return err
			}
			// Drain what is already queued before re-planning.
			for n := 0; n < 64; n++ {
				select {
				case m := <-s.events:
					if err := s.handleMsg(m); err != nil {
						return err
					}
					continue
				default:
				}
				break
			}
		case <-s.wake:
			s.drv.MarkDirty()
		case <-retry.C:
			if s.drv.Pending() {
				s.drv.MarkDirty()
			}
		case t := <-s.resolvedCh:
			s.drv.ResolveDone(t)
		case <-resolveC:
			s.startStuckCheck()
		case sample := <-s.tsoCh:
			s.checkStuck(sample)
		}
	}
}

// Close releases the connections. Run closes its streams itself; Close
// after Run is the normal order, and it is idempotent.
func (s *GRPCSource) Close() error {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	s.closed = true
	var first error
	for addr, c := range s.conns {
		if err := c.Close(); err != nil && first == nil {
			first = fmt.Errorf("logpuller: close connection to %s: %w", addr, err)
		}
		delete(s.conns, addr)
	}
	return first
}

func (s *GRPCSource) shutdown() {
	s.regions.clear()
	s.baseCancel()
	s.drv.CloseStreams()
	// Unblock goroutines reporting into the channels while we wait; the
	// events left give their queue charge back (LP19: the quota outlives
	// the source).
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	for {
		select {
		case <-done:
			for {
				select {
				case m := <-s.events:
					s.queue.done(m.bytes, m.charged)
				default:
					return
				}
			}
		case m := <-s.events:
			s.queue.done(m.bytes, m.charged)
		case <-s.resolvedCh:
		case <-s.tsoCh:
		}
	}
}

// QueueStats is the event queue's accounting: the heap of received events
// Run has not finished with, its peak, and the events the memory quota
// could not take (LP19).
func (s *GRPCSource) QueueStats() QueueStats { return s.queue.snapshot() }

// grpcDialer opens the driver's streams as gRPC EventFeed(V2) calls, each
// run by its own goroutines (runStream).
type grpcDialer struct{ s *GRPCSource }

func (d grpcDialer) Open(ds *Stream) (StreamConn, error) {
	s := d.s
	ctx, cancel := context.WithCancel(s.baseCtx)
	st := &grpcStream{ds: ds, ctx: ctx, cancel: cancel, sendWake: make(chan struct{}, 1)}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.runStream(st)
	}()
	return st, nil
}

// Close cancels the stream; its goroutines end on their own.
func (st *grpcStream) Close() { st.cancel() }

func (s *GRPCSource) conn(addr string) (*grpc.ClientConn, error) {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	if s.closed {
		return nil, errors.New("logpuller: source closed")
	}
	if c := s.conns[addr]; c != nil {
		return c, nil
	}
	c, err := grpc.NewClient(addr, dialOptions(s.cfg.TLS)...)
	if err != nil {
		return nil, fmt.Errorf("logpuller: dial store %s: %w", addr, err)
	}
	s.conns[addr] = c
	return c, nil
}

func (s *GRPCSource) handleMsg(m streamMsg) error {
	defer s.queue.done(m.bytes, m.charged)
	if m.st.Dead() {
		return nil // leftovers of a stream already given up
	}
	if m.err != nil {
		s.drv.FailStream(m.st, m.err)
		return nil
	}
	return s.drv.HandleEvent(m.st, m.ev)
}

// stuckSample is one stuck-check's clock readings: the wall clock, then
// the TSO.
type stuckSample struct {
	nowMs int64
	ts    uint64
}

// startStuckCheck fetches a TSO in the background (PD may be slow; Run
// must keep handling events) and hands it to Run, which then runs the
// planner (checkStuck). At most one fetch is in flight.
func (s *GRPCSource) startStuckCheck() {
	if s.tsoInFlight {
		return
	}
	s.tsoInFlight = true
	// The wall clock is read before the TSO is fetched, so the TSO is never
	// older than the time the planner judges staleness by (its target is
	// min(TSO, resolved time + 4 s)).
	nowMs := s.cfg.Now().UnixMilli()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(s.baseCtx, s.cfg.DialTimeout)
		cur, err := s.cfg.Clock.CurrentTs(ctx)
		cancel()
		if err != nil {
			cur = 0 // retried on the next tick
		}
		select {
		case s.tsoCh <- stuckSample{nowMs: nowMs, ts: cur}:
		case <-s.baseCtx.Done():
		}
	}()
}

// checkStuck runs the driver's stuck-resolved-ts planner with the sampled
// clocks and resolves the locks of the regions it names, in the
// background (T10).
func (s *GRPCSource) checkStuck(sample stuckSample) {
	s.tsoInFlight = false
	if sample.ts == 0 {
		return
	}
	for _, task := range s.drv.StuckTasks(sample.nowMs, sample.ts) {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			// An error is retried by the planner after its cool-down.
			_ = s.cfg.Resolver.ResolveLocks(s.baseCtx, task.LockResolveTask)
			select {
			case s.resolvedCh <- task:
			case <-s.baseCtx.Done():
			}
		}()
	}
}
