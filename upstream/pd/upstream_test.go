package pd_test

import (
	"context"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/cdcfeed"
	"github.com/searchfabric/sfemu/fakeupstream/grpcserver"
	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/logpuller"
	"github.com/searchfabric/sfemu/upstream/pd"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
)

type lastResolved struct {
	rows     chan int
	resolved chan uint64
}

func (l *lastResolved) ConsumeKV(es []kvevent.RawKVEntry) { l.rows <- len(es) }
func (l *lastResolved) AdvanceResolvedTs(ts uint64) {
	select {
	case l.resolved <- ts:
	default:
	}
}

// OpenUpstream wires PD, locator and KV store into a working gRPC source.
func TestOpenUpstreamSource(t *testing.T) {
	c, err := fakeupstream.New(fakeupstream.Config{Seed: 2, Stores: 2, RealClock: true, Feed: cdcfeed.Config{ResolvedTsIntervalMs: 20}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := grpcserver.Start(c, grpcserver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	u, err := pd.OpenUpstream(ctx, pd.Config{Endpoints: []string{s.PDAddr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	src, err := u.NewSource(logpuller.TransportConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	start, err := u.PD.CurrentTs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hold, err := u.HoldGC(ctx, pd.ServiceSafePointConfig{ServiceID: "sfemu-upstream-test"}, start)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := hold.Remove(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	if hold.Held() != start-1 {
		t.Fatalf("held %d, want %d", hold.Held(), start-1)
	}
	p := tablecodec.EncodeRecordPrefix(nil, 3)
	span := kvevent.Span{StartKey: codec.EncodeBytes(nil, p), EndKey: codec.EncodeBytes(nil, tablecodec.PrefixNext(p))}
	cons := &lastResolved{rows: make(chan int, 16), resolved: make(chan uint64, 1)}
	if err := src.Subscribe(ctx, 1, span, start, cons); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- src.Run(runCtx) }()
	commit, err := c.Put(tablecodec.EncodeIntRecordKey(nil, 3, 1), []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-cons.rows:
		if n != 1 {
			t.Fatalf("%d rows", n)
		}
	case <-ctx.Done():
		t.Fatal("row never arrived")
	}
	for r := uint64(0); r < commit; {
		select {
		case r = <-cons.resolved:
		case <-ctx.Done():
			t.Fatal("resolved ts never passed the commit")
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
