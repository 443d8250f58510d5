package fakeupstream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pingcap/kvproto/pkg/cdcpb"
	"github.com/pingcap/kvproto/pkg/kvrpcpb"

	"github.com/searchfabric/sfemu/fakeupstream/cdcfeed"
	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/logpuller"
)

// ClientVersion is the ticdc_version the in-process client announces.
const ClientVersion = "6.5.0"

// Source is the in-process kvevent.Source: it subscribes spans on the fake
// cluster's CDC feed, one stream per store shared by all spans (stream
// multiplexing, one request id per span), hands every cdcpb event to the
// project's one puller core (upstream/logpuller) and re-subscribes what the
// core reports as failed, using the core's frontier holes as the list of
// work: a hole is re-located region by region and subscribed from the
// checkpoint the core returns.
//
// Deliveries happen inside Pump (tests call it after stepping the cluster)
// or inside Run (a loop that pumps on an interval, for the demo). Consumers
// are called synchronously from there; they may call Subscribe.
type Source struct {
	c        *Cluster
	interval time.Duration

	newMu   sync.Mutex
	newSubs []*subscription

	mu       sync.Mutex
	subs     []*subscription
	byReq    map[uint64]*subscription
	streams  map[uint64]*cdcfeed.Stream
	onStream map[*cdcfeed.Stream]map[regionKey]bool
	nextReq  uint64
	fatal    error
	closed   bool
}

type regionKey struct {
	sub      *subscription
	regionID uint64
}

type subscription struct {
	ctx    context.Context
	id     uint64
	reqID  uint64
	span   kvevent.Span
	puller *logpuller.SpanPuller
}

// SourceConfig tunes a Source.
type SourceConfig struct {
	// PollInterval is Run's pause between pumps (default 5ms).
	PollInterval time.Duration
}

// NewSource returns a Source reading from c.
func (c *Cluster) NewSource(cfg SourceConfig) *Source {
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 5 * time.Millisecond
	}
	return &Source{
		c:        c,
		interval: cfg.PollInterval,
		byReq:    map[uint64]*subscription{},
		streams:  map[uint64]*cdcfeed.Stream{},
		onStream: map[*cdcfeed.Stream]map[regionKey]bool{},
	}
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
	p, err := logpuller.NewSpanPuller(logpuller.Config{Span: span, StartTs: startTs, Consumer: c})
	if err != nil {
		return fmt.Errorf("fakeupstream: subscribe %d: %w", subID, err)
	}
	s.newMu.Lock()
	defer s.newMu.Unlock()
	s.newSubs = append(s.newSubs, &subscription{ctx: ctx, id: subID, span: span, puller: p})
	return nil
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
	for _, st := range s.streams {
		st.Close()
	}
	s.streams = map[uint64]*cdcfeed.Stream{}
	return nil
}

// Pump runs the cluster's resolved-ts tick if due, then subscribes holes,
// delivers everything the feed has ready and hands it to the pullers, until
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
		s.adopt()
		s.dropCancelled()
		s.subscribeHoles()
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

func (s *Source) adopt() {
	s.newMu.Lock()
	subs := s.newSubs
	s.newSubs = nil
	s.newMu.Unlock()
	for _, sub := range subs {
		s.nextReq++
		sub.reqID = s.nextReq
		s.byReq[sub.reqID] = sub
		s.subs = append(s.subs, sub)
	}
}

func (s *Source) dropCancelled() {
	keep := s.subs[:0]
	for _, sub := range s.subs {
		if sub.ctx.Err() == nil {
			keep = append(keep, sub)
			continue
		}
		delete(s.byReq, sub.reqID)
		for st, regions := range s.onStream {
			for k := range regions {
				if k.sub == sub {
					delete(regions, k)
				}
			}
			st.Send(&cdcpb.ChangeDataRequest{RequestId: sub.reqID,
				Request: &cdcpb.ChangeDataRequest_Deregister_{Deregister: &cdcpb.ChangeDataRequest_Deregister{}}})
		}
	}
	for i := len(keep); i < len(s.subs); i++ {
		s.subs[i] = nil
	}
	s.subs = keep
}

func (s *Source) stream(store uint64) (*cdcfeed.Stream, error) {
	if st := s.streams[store]; st != nil {
		return st, nil
	}
	st, err := s.c.OpenStream(store)
	if err != nil {
		return nil, err
	}
	s.streams[store] = st
	s.onStream[st] = map[regionKey]bool{}
	return st, nil
}

// subscribeHoles subscribes every unheld piece of every span, region by
// region. Pieces that cannot be subscribed yet (no leader, store down, a
// stale region still holding an overlapping range) stay holes and are
// retried on the next round.
func (s *Source) subscribeHoles() {
	for _, sub := range s.subs {
		for _, h := range sub.puller.Holes() {
			for _, r := range s.c.RegionsInSpan(h.Span) {
				if r.Leader == 0 {
					continue
				}
				piece, ok := logpuller.Intersect(kvevent.Span{StartKey: r.StartKey, EndKey: r.EndKey}, sub.span)
				if !ok {
					continue
				}
				st, err := s.stream(r.Leader)
				if err != nil {
					continue
				}
				ts, err := sub.puller.AddRegion(r.ID, sub.reqID, piece)
				if err != nil {
					continue // held by a region whose error has not arrived yet
				}
				req := &cdcpb.ChangeDataRequest{
					Header:       &cdcpb.Header{TicdcVersion: ClientVersion},
					RegionId:     r.ID,
					RegionEpoch:  r.Epoch(),
					CheckpointTs: ts,
					StartKey:     piece.StartKey,
					EndKey:       piece.EndKey,
					RequestId:    sub.reqID,
					ExtraOp:      kvrpcpb.ExtraOp_ReadOldValue,
					Request:      &cdcpb.ChangeDataRequest_Register_{Register: &cdcpb.ChangeDataRequest_Register{}},
				}
				if err := st.Send(req); err != nil {
					sub.puller.FailRegion(r.ID, logpuller.RetryStreamFailure, nil)
					s.dropStream(st)
					continue
				}
				s.onStream[st][regionKey{sub, r.ID}] = true
			}
		}
	}
}

func (s *Source) dropStream(st *cdcfeed.Stream) {
	for k := range s.onStream[st] {
		k.sub.puller.FailRegion(k.regionID, logpuller.RetryStreamFailure, nil)
	}
	delete(s.onStream, st)
	if s.streams[st.StoreID()] == st {
		delete(s.streams, st.StoreID())
	}
}

// drain hands every received message to its span's puller. It reports
// whether anything arrived.
func (s *Source) drain() (bool, error) {
	moved := false
	for _, store := range sortedKeys(s.streams) {
		st := s.streams[store]
		msgs, err := st.Recv()
		if err != nil {
			s.dropStream(st)
			moved = true
			continue
		}
		for _, m := range msgs {
			moved = true
			if m.ResolvedTs != nil {
				if sub := s.byReq[m.ResolvedTs.RequestId]; sub != nil {
					sub.puller.HandleResolvedTs(m.ResolvedTs)
				}
				continue
			}
			for _, ev := range m.Events {
				sub := s.byReq[ev.RequestId]
				if sub == nil {
					continue // a cancelled subscription's leftovers
				}
				retry, err := sub.puller.HandleEvent(ev)
				if err != nil {
					return true, fmt.Errorf("fakeupstream: subscription %d: %w", sub.id, err)
				}
				if retry != nil {
					delete(s.onStream[st], regionKey{sub, retry.RegionID})
				}
			}
		}
	}
	return moved, nil
}

func sortedKeys(m map[uint64]*cdcfeed.Stream) []uint64 {
	out := make([]uint64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// SpanStats returns the puller counters of subscription subID (for tests
// and metrics).
func (s *Source) SpanStats(subID uint64) (logpuller.Stats, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sub := range s.subs {
		if sub.id == subID {
			return sub.puller.Stats(), true
		}
	}
	return logpuller.Stats{}, false
}
