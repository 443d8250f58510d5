package grpcserver

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/pingcap/kvproto/pkg/cdcpb"
	"github.com/pingcap/kvproto/pkg/errorpb"
	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/sqlfront"
	"github.com/searchfabric/sfemu/fakeupstream/topology"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
)

// feedClient is a raw cdcpb client stream that collects what it receives.
type feedClient struct {
	t      testing.TB
	stream grpc.BidiStreamingClient[cdcpb.ChangeDataRequest, cdcpb.ChangeDataEvent]
	cancel context.CancelFunc

	mu   sync.Mutex
	evs  []*cdcpb.ChangeDataEvent
	err  error
	done chan struct{}
}

type feedKind int

const (
	feedV1 feedKind = iota
	feedV2Mux
	feedV2Plain
)

func dialStore(t testing.TB, s *Servers, store uint64) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(s.StoreAddr(store), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

func openFeed(t testing.TB, s *Servers, store uint64, kind feedKind) *feedClient {
	t.Helper()
	cli := cdcpb.NewChangeDataClient(dialStore(t, s, store))
	ctx, cancel := context.WithCancel(context.Background())
	var err error
	fc := &feedClient{t: t, cancel: cancel, done: make(chan struct{})}
	switch kind {
	case feedV1:
		fc.stream, err = cli.EventFeed(ctx)
	case feedV2Mux:
		fc.stream, err = cli.EventFeedV2(metadata.AppendToOutgoingContext(ctx, FeaturesKey, StreamMultiplexing))
	case feedV2Plain:
		fc.stream, err = cli.EventFeedV2(ctx)
	}
	require.NoError(t, err)
	go func() {
		defer close(fc.done)
		for {
			ev, err := fc.stream.Recv()
			fc.mu.Lock()
			if err != nil {
				fc.err = err
				fc.mu.Unlock()
				return
			}
			fc.evs = append(fc.evs, ev)
			fc.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-fc.done
	})
	return fc
}

func (fc *feedClient) send(req *cdcpb.ChangeDataRequest) {
	fc.t.Helper()
	require.NoError(fc.t, fc.stream.Send(req))
}

// waitFor polls until cond holds over everything received so far.
func (fc *feedClient) waitFor(what string, cond func(evs []*cdcpb.ChangeDataEvent) bool) []*cdcpb.ChangeDataEvent {
	fc.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		fc.mu.Lock()
		evs := append([]*cdcpb.ChangeDataEvent(nil), fc.evs...)
		err := fc.err
		fc.mu.Unlock()
		if cond(evs) {
			return evs
		}
		if err != nil || time.Now().After(deadline) {
			fc.t.Fatalf("waiting for %s: stream error %v; received %d messages: %v", what, err, len(evs), evs)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// rows returns the rows of region/request received so far.
func rowsOf(evs []*cdcpb.ChangeDataEvent, region, req uint64) []*cdcpb.Event_Row {
	var out []*cdcpb.Event_Row
	for _, ev := range evs {
		for _, e := range ev.Events {
			if e.RegionId == region && e.RequestId == req {
				out = append(out, e.GetEntries().GetEntries()...)
			}
		}
	}
	return out
}

func errorsOf(evs []*cdcpb.ChangeDataEvent, region, req uint64) []*cdcpb.Error {
	var out []*cdcpb.Error
	for _, ev := range evs {
		for _, e := range ev.Events {
			if e.RegionId == region && e.RequestId == req && e.GetError() != nil {
				out = append(out, e.GetError())
			}
		}
	}
	return out
}

func countType(rows []*cdcpb.Event_Row, ty cdcpb.Event_LogType) int {
	n := 0
	for _, r := range rows {
		if r.Type == ty {
			n++
		}
	}
	return n
}

// tableSpan is the table's record span in comparable form.
func tableSpan(tid int64) (start, end []byte) {
	p := tablecodec.EncodeRecordPrefix(nil, tid)
	return codec.EncodeBytes(nil, p), codec.EncodeBytes(nil, tablecodec.PrefixNext(p))
}

func register(s *Servers, r topology.Region, reqID, checkpoint uint64, start, end []byte, version string) *cdcpb.ChangeDataRequest {
	return &cdcpb.ChangeDataRequest{
		Header:       &cdcpb.Header{ClusterId: s.ClusterID(), TicdcVersion: version},
		RegionId:     r.ID,
		RegionEpoch:  r.Epoch(),
		CheckpointTs: checkpoint,
		StartKey:     start,
		EndKey:       end,
		RequestId:    reqID,
		ExtraOp:      kvrpcpb.ExtraOp_ReadOldValue,
	}
}

// emptyTable creates d.t without rows and returns the SQL session and id.
func emptyTable(t testing.TB, c *fakeupstream.Cluster) (*sqlfront.Session, int64) {
	t.Helper()
	fe, tid := sqlTable(t, c, 0)
	ss := fe.NewSession("d")
	return ss, tid
}

// TestEventFeedV2Multiplexed: scan rows, INITIALIZED, live rows, batched
// resolved ts carrying the request id, a split answered with
// epoch_not_match, Deregister of one request id, and duplicate keyed by
// (request id, region). (G50, G54, G55, G56)
func TestEventFeedV2Multiplexed(t *testing.T) {
	c, s := startCluster(t, fakeupstream.Config{Seed: 5, Stores: 1})
	ss, tid := emptyTable(t, c)
	checkpoint := c.Oracle().Next()
	mustExec(t, ss, "INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
	start, end := tableSpan(tid)
	rs := c.RegionsInSpan(spanOf(start, end))
	require.Len(t, rs, 1)
	r := rs[0]

	fc := openFeed(t, s, 1, feedV2Mux)
	fc.send(register(s, r, 7, checkpoint, start, end, "8.5.0"))
	fc.send(register(s, r, 8, checkpoint, start, end, "8.5.0")) // same region, other request id: fine
	evs := fc.waitFor("scan rows and INITIALIZED of both requests", func(evs []*cdcpb.ChangeDataEvent) bool {
		return countType(rowsOf(evs, r.ID, 7), cdcpb.Event_INITIALIZED) == 1 && countType(rowsOf(evs, r.ID, 8), cdcpb.Event_INITIALIZED) == 1
	})
	scan := rowsOf(evs, r.ID, 7)
	require.Equal(t, 3, countType(scan, cdcpb.Event_COMMITTED), "incremental scan: %v", scan)
	require.Equal(t, cdcpb.Event_INITIALIZED, scan[len(scan)-1].Type)

	// Duplicate (request id, region) on a multiplexed stream.
	fc.send(register(s, r, 7, checkpoint, start, end, "8.5.0"))
	fc.waitFor("duplicate_request", func(evs []*cdcpb.ChangeDataEvent) bool {
		for _, e := range errorsOf(evs, r.ID, 7) {
			if e.DuplicateRequest != nil {
				return true
			}
		}
		return false
	})

	// Live rows and resolved ts with the request id.
	mustExec(t, ss, "INSERT INTO t VALUES (4, 'd')")
	require.NoError(t, c.Advance(time.Second))
	evs = fc.waitFor("live row and resolved ts", func(evs []*cdcpb.ChangeDataEvent) bool {
		live := rowsOf(evs, r.ID, 7)
		got := false
		for _, ev := range evs {
			if rt := ev.ResolvedTs; rt != nil && rt.RequestId == 7 && len(rt.Regions) == 1 && rt.Regions[0] == r.ID {
				got = true
			}
		}
		return got && countType(live, cdcpb.Event_COMMITTED)+countType(live, cdcpb.Event_COMMIT) >= 4
	})
	for _, ev := range evs {
		require.False(t, ev.ResolvedTs != nil && len(ev.Events) > 0, "resolved ts and events in one message")
	}

	// Deregister request 8: no more rows for it.
	fc.send(&cdcpb.ChangeDataRequest{RequestId: 8, Request: &cdcpb.ChangeDataRequest_Deregister_{Deregister: &cdcpb.ChangeDataRequest_Deregister{}}})
	time.Sleep(20 * time.Millisecond)
	before := len(rowsOf(fc.waitFor("", func([]*cdcpb.ChangeDataEvent) bool { return true }), r.ID, 8))
	mustExec(t, ss, "INSERT INTO t VALUES (5, 'e')")
	evs = fc.waitFor("row 5 on request 7", func(evs []*cdcpb.ChangeDataEvent) bool {
		for _, row := range rowsOf(evs, r.ID, 7) {
			if string(row.Key) == string(tablecodec.EncodeIntRecordKey(nil, tid, 5)) && (row.Type == cdcpb.Event_COMMIT || row.Type == cdcpb.Event_COMMITTED) {
				return true
			}
		}
		return false
	})
	require.Equal(t, before, len(rowsOf(evs, r.ID, 8)), "a deregistered request got rows")

	// Split the region mid-stream: epoch_not_match listing both halves.
	_, _, err := c.SplitRaw(tablecodec.EncodeIntRecordKey(nil, tid, 3))
	require.NoError(t, err)
	evs = fc.waitFor("epoch_not_match", func(evs []*cdcpb.ChangeDataEvent) bool {
		for _, e := range errorsOf(evs, r.ID, 7) {
			if e.EpochNotMatch != nil {
				return true
			}
		}
		return false
	})
	for _, e := range errorsOf(evs, r.ID, 7) {
		if e.EpochNotMatch != nil {
			require.Len(t, e.EpochNotMatch.CurrentRegions, 2)
		}
	}
	// Re-registering with the stale epoch is refused the same way.
	fc.send(register(s, r, 9, checkpoint, start, end, "8.5.0"))
	fc.waitFor("epoch_not_match for a stale epoch", func(evs []*cdcpb.ChangeDataEvent) bool {
		es := errorsOf(evs, r.ID, 9)
		return len(es) == 1 && es[0].EpochNotMatch != nil
	})
}

// TestEventFeedV1: one subscription per region per stream (a second
// register of the region, even under another request id, answers
// DuplicateRequest) and batched resolved ts without request ids. A plain
// EventFeedV2 (no features metadata) behaves the same. (G50, G51)
func TestEventFeedV1(t *testing.T) {
	for _, kind := range []feedKind{feedV1, feedV2Plain} {
		c, s := startCluster(t, fakeupstream.Config{Seed: 6, Stores: 1})
		ss, tid := emptyTable(t, c)
		checkpoint := c.Oracle().Next()
		mustExec(t, ss, "INSERT INTO t VALUES (1, 'a')")
		start, end := tableSpan(tid)
		r := c.RegionsInSpan(spanOf(start, end))[0]

		fc := openFeed(t, s, 1, kind)
		fc.send(register(s, r, 1, checkpoint, start, end, "6.5.0"))
		fc.send(register(s, r, 2, checkpoint, start, end, "6.5.0"))
		evs := fc.waitFor("INITIALIZED and duplicate", func(evs []*cdcpb.ChangeDataEvent) bool {
			es := errorsOf(evs, r.ID, 2)
			return countType(rowsOf(evs, r.ID, 1), cdcpb.Event_INITIALIZED) == 1 && len(es) == 1 && es[0].DuplicateRequest != nil
		})
		require.Equal(t, 1, countType(rowsOf(evs, r.ID, 1), cdcpb.Event_COMMITTED))
		require.Empty(t, rowsOf(evs, r.ID, 2))

		mustExec(t, ss, "INSERT INTO t VALUES (2, 'b')")
		fc.waitFor("v1 live row", func(evs []*cdcpb.ChangeDataEvent) bool {
			rows := rowsOf(evs, r.ID, 1)
			return countType(rows, cdcpb.Event_COMMIT)+countType(rows, cdcpb.Event_COMMITTED) >= 2
		})
		require.NoError(t, c.Advance(time.Second))
		fc.waitFor("v1 resolved ts", func(evs []*cdcpb.ChangeDataEvent) bool {
			for _, ev := range evs {
				if rt := ev.ResolvedTs; rt != nil {
					require.Zero(t, rt.RequestId, "v1 resolved ts carry no request id")
					return true
				}
			}
			return false
		})

		// After the region's subscription ends with an error, the region
		// may be registered again on the same stream.
		c.FailRegion(r.ID, &cdcpb.Error{Congested: &cdcpb.Congested{RegionId: r.ID}})
		fc.waitFor("congested", func(evs []*cdcpb.ChangeDataEvent) bool {
			es := errorsOf(evs, r.ID, 1)
			return len(es) == 1 && es[0].Congested != nil
		})
		fc.send(register(s, r, 3, checkpoint, start, end, "6.5.0"))
		fc.waitFor("re-registration after the error", func(evs []*cdcpb.ChangeDataEvent) bool {
			return countType(rowsOf(evs, r.ID, 3), cdcpb.Event_INITIALIZED) == 1
		})
	}
}

// TestEventFeedVersionGates: from 5.3.0 the header's cluster id is
// checked; a client older than 4.0.8 gets per-region resolved ts events.
// (G52, G53)
func TestEventFeedVersionGates(t *testing.T) {
	c, s := startCluster(t, fakeupstream.Config{Seed: 7, Stores: 1})
	_, tid := emptyTable(t, c)
	start, end := tableSpan(tid)
	r := c.RegionsInSpan(spanOf(start, end))[0]
	cp := c.Oracle().Next()

	fc := openFeed(t, s, 1, feedV2Mux)
	req := register(s, r, 1, cp, start, end, "6.5.0")
	req.Header.ClusterId = 42
	fc.send(req)
	fc.waitFor("cluster_id_mismatch", func(evs []*cdcpb.ChangeDataEvent) bool {
		es := errorsOf(evs, r.ID, 1)
		return len(es) == 1 && es[0].ClusterIdMismatch != nil && es[0].ClusterIdMismatch.Current == s.ClusterID() && es[0].ClusterIdMismatch.Request == 42
	})

	old := openFeed(t, s, 1, feedV1)
	req = register(s, r, 1, cp, start, end, "4.0.0")
	req.Header.ClusterId = 42 // not checked before 5.3.0
	old.send(req)
	old.waitFor("INITIALIZED", func(evs []*cdcpb.ChangeDataEvent) bool {
		return countType(rowsOf(evs, r.ID, 1), cdcpb.Event_INITIALIZED) == 1
	})
	require.NoError(t, c.Advance(time.Second))
	evs := old.waitFor("per-region resolved ts", func(evs []*cdcpb.ChangeDataEvent) bool {
		for _, ev := range evs {
			for _, e := range ev.Events {
				if e.RegionId == r.ID && e.GetResolvedTs() > 0 {
					return true
				}
			}
		}
		return false
	})
	for _, ev := range evs {
		require.Nil(t, ev.ResolvedTs, "no batched resolved ts for a pre-4.0.8 client")
	}

	// kv_api TxnKV is not served.
	bad := register(s, r, 5, cp, start, end, "6.5.0")
	bad.KvApi = cdcpb.ChangeDataRequest_TxnKV
	fc.send(bad)
	fc.waitFor("compatibility", func(evs []*cdcpb.ChangeDataEvent) bool {
		es := errorsOf(evs, r.ID, 5)
		return len(es) == 1 && es[0].Compatibility != nil
	})
}

// TestEventFeedStoreDown: a store going down breaks its streams
// (Unavailable) and refuses new ones; a request to a store that is not
// the leader answers not_leader. (G30, G56)
func TestEventFeedStoreDown(t *testing.T) {
	c, s := startCluster(t, fakeupstream.Config{Seed: 8, Stores: 2})
	_, tid := emptyTable(t, c)
	start, end := tableSpan(tid)
	r := c.RegionsInSpan(spanOf(start, end))[0]
	cp := c.Oracle().Next()

	follower := openFeed(t, s, 2, feedV2Mux)
	follower.send(register(s, r, 1, cp, start, end, "8.5.0"))
	follower.waitFor("not_leader", func(evs []*cdcpb.ChangeDataEvent) bool {
		es := errorsOf(evs, r.ID, 1)
		return len(es) == 1 && es[0].NotLeader != nil && es[0].NotLeader.Leader.GetStoreId() == 1
	})

	fc := openFeed(t, s, 1, feedV2Mux)
	fc.send(register(s, r, 1, cp, start, end, "8.5.0"))
	fc.waitFor("INITIALIZED", func(evs []*cdcpb.ChangeDataEvent) bool {
		return countType(rowsOf(evs, r.ID, 1), cdcpb.Event_INITIALIZED) == 1
	})
	require.NoError(t, c.StoreDown(1))
	select {
	case <-fc.done:
	case <-time.After(10 * time.Second):
		t.Fatal("stream to a down store did not end")
	}
	require.Equal(t, codes.Unavailable, status.Code(fc.err), "%v", fc.err)

	again := openFeed(t, s, 1, feedV2Mux)
	<-again.done
	require.Equal(t, codes.Unavailable, status.Code(again.err), "%v", again.err)

	// Back up: streams are served again; the leader stayed on store 2.
	require.NoError(t, c.StoreUp(1))
	back := openFeed(t, s, 1, feedV2Mux)
	back.send(register(s, r, 3, cp, start, end, "8.5.0"))
	back.waitFor("not_leader from the revived store", func(evs []*cdcpb.ChangeDataEvent) bool {
		es := errorsOf(evs, r.ID, 3)
		return len(es) == 1 && es[0].NotLeader != nil && es[0].NotLeader.Leader.GetStoreId() == 2
	})
}

type cdcpbEvents = cdcpb.ChangeDataEvent

const cdcpbInitialized = cdcpb.Event_INITIALIZED

// TestWakeDeliversWithoutPolling: with a poll interval of an hour, a write
// reaches the client only because Wake is called. (G58)
func TestWakeDeliversWithoutPolling(t *testing.T) {
	c, err := fakeupstream.New(fakeupstream.Config{Seed: 14, Stores: 1})
	require.NoError(t, err)
	s, err := Start(c, Config{PollInterval: time.Hour})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	_, tid := emptyTable(t, c)
	start, end := tableSpan(tid)
	r := c.RegionsInSpan(spanOf(start, end))[0]
	fc := openFeed(t, s, 1, feedV2Mux)
	fc.send(register(s, r, 1, c.Oracle().Next(), start, end, "8.5.0")) // a request wakes its own stream
	fc.waitFor("INITIALIZED", func(evs []*cdcpb.ChangeDataEvent) bool {
		return countType(rowsOf(evs, r.ID, 1), cdcpb.Event_INITIALIZED) == 1
	})
	_, err = c.Put(tablecodec.EncodeIntRecordKey(nil, tid, 1), []byte("x"))
	require.NoError(t, err)
	time.Sleep(50 * time.Millisecond)
	fc.mu.Lock()
	n := len(rowsOf(fc.evs, r.ID, 1))
	fc.mu.Unlock()
	require.Equal(t, 1, n, "the row arrived without Wake: the stream is polling faster than configured")
	s.Wake()
	fc.waitFor("the row after Wake", func(evs []*cdcpb.ChangeDataEvent) bool {
		return countType(rowsOf(evs, r.ID, 1), cdcpb.Event_COMMITTED) == 1
	})
}

// TestEventFeedMergeAndBusy: a merge ends both regions' subscriptions
// with epoch_not_match; server_is_busy passes through with its backoff.
// (G56, G57 and the feed's region errors on the wire)
func TestEventFeedMergeAndBusy(t *testing.T) {
	c, s := startCluster(t, fakeupstream.Config{Seed: 16, Stores: 1})
	_, tid := emptyTable(t, c)
	start, end := tableSpan(tid)
	_, _, err := c.SplitRaw(tablecodec.EncodeIntRecordKey(nil, tid, 100))
	require.NoError(t, err)
	rs := c.RegionsInSpan(spanOf(start, end))
	require.Len(t, rs, 2)
	cp := c.Oracle().Next()
	fc := openFeed(t, s, 1, feedV2Mux)
	for _, r := range rs {
		fc.send(register(s, r, 1, cp, start, end, "8.5.0"))
	}
	fc.waitFor("both INITIALIZED", func(evs []*cdcpb.ChangeDataEvent) bool {
		return countType(rowsOf(evs, rs[0].ID, 1), cdcpb.Event_INITIALIZED) == 1 && countType(rowsOf(evs, rs[1].ID, 1), cdcpb.Event_INITIALIZED) == 1
	})
	_, err = c.Merge(rs[0].ID, rs[1].ID)
	require.NoError(t, err)
	fc.waitFor("epoch_not_match for both", func(evs []*cdcpb.ChangeDataEvent) bool {
		for _, r := range rs {
			es := errorsOf(evs, r.ID, 1)
			if len(es) != 1 || es[0].EpochNotMatch == nil {
				return false
			}
		}
		return true
	})
	merged := c.RegionsInSpan(spanOf(start, end))
	require.Len(t, merged, 1)
	fc.send(register(s, merged[0], 2, cp, start, end, "8.5.0"))
	fc.waitFor("INITIALIZED after merge", func(evs []*cdcpb.ChangeDataEvent) bool {
		return countType(rowsOf(evs, merged[0].ID, 2), cdcpb.Event_INITIALIZED) == 1
	})
	c.FailRegion(merged[0].ID, &cdcpb.Error{ServerIsBusy: &errorpb.ServerIsBusy{Reason: "too many pending incremental scans", BackoffMs: 50}})
	fc.waitFor("server_is_busy", func(evs []*cdcpb.ChangeDataEvent) bool {
		es := errorsOf(evs, merged[0].ID, 2)
		return len(es) == 1 && es[0].ServerIsBusy.GetBackoffMs() == 50
	})
}

// TestEventFeedDropStreams: a network fault on the feed ends the gRPC
// stream with Unavailable and a new stream subscribes again. (G56)
func TestEventFeedDropStreams(t *testing.T) {
	c, s := startCluster(t, fakeupstream.Config{Seed: 18, Stores: 1})
	_, tid := emptyTable(t, c)
	start, end := tableSpan(tid)
	r := c.RegionsInSpan(spanOf(start, end))[0]
	cp := c.Oracle().Next()
	fc := openFeed(t, s, 1, feedV1)
	fc.send(register(s, r, 1, cp, start, end, "6.5.0"))
	fc.waitFor("INITIALIZED", func(evs []*cdcpb.ChangeDataEvent) bool {
		return countType(rowsOf(evs, r.ID, 1), cdcpb.Event_INITIALIZED) == 1
	})
	require.Equal(t, 1, c.DropStreams(1))
	select {
	case <-fc.done:
	case <-time.After(10 * time.Second):
		t.Fatal("dropped stream did not end")
	}
	require.Equal(t, codes.Unavailable, status.Code(fc.err), "%v", fc.err)
	again := openFeed(t, s, 1, feedV1)
	again.send(register(s, r, 1, cp, start, end, "6.5.0"))
	again.waitFor("INITIALIZED again", func(evs []*cdcpb.ChangeDataEvent) bool {
		return countType(rowsOf(evs, r.ID, 1), cdcpb.Event_INITIALIZED) == 1
	})
}
