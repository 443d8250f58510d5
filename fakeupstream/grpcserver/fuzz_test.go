package grpcserver

import (
	"context"
	"testing"

	"github.com/pingcap/kvproto/pkg/cdcpb"
	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	"github.com/pingcap/kvproto/pkg/metapb"

	"github.com/searchfabric/sfemu/fakeupstream"
)

// offlineServers wires the handlers to a small cluster without listening,
// so fuzz targets can call them directly.
func offlineServers(t testing.TB) *Servers {
	c, err := fakeupstream.New(fakeupstream.Config{Seed: 1, Stores: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "k", "m", "t"} {
		if _, err := c.Put([]byte(k), []byte("v"+k)); err != nil {
			t.Fatal(err)
		}
	}
	txn := c.Begin()
	txn.Set([]byte("l"), []byte("locked"))
	if err := txn.Prewrite(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.SplitRaw([]byte("m")); err != nil {
		t.Fatal(err)
	}
	cfg := Config{}
	cfg.fill()
	return &Servers{c: c, cfg: cfg, done: make(chan struct{}), wakeCh: make(chan struct{}), unimpl: map[string]int{}}
}

type unmarshaler interface{ Unmarshal([]byte) error }

// FuzzTiKVRequests: no KV handler panics on any request (arbitrary
// regions, epochs, keys, ranges, timestamps, limits, writes). (G31-G44)
func FuzzTiKVRequests(f *testing.F) {
	rc := &kvrpcpb.Context{RegionId: 1, RegionEpoch: &metapb.RegionEpoch{ConfVer: 1, Version: 2}}
	seeds := []unmarshaler{
		&kvrpcpb.GetRequest{Context: rc, Key: []byte("a"), Version: 1 << 62},
		&kvrpcpb.ScanRequest{Context: rc, StartKey: []byte("z"), EndKey: []byte("a"), Limit: 3, Version: 1 << 62, Reverse: true},
		&kvrpcpb.ScanLockRequest{Context: rc, StartKey: []byte("b"), MaxVersion: 1 << 62},
		&kvrpcpb.ResolveLockRequest{Context: rc, StartVersion: 5, CommitVersion: 3},
		&kvrpcpb.GetRequest{}, &kvrpcpb.GetRequest{}, &kvrpcpb.GetRequest{}, &kvrpcpb.GetRequest{},
		&kvrpcpb.PrewriteRequest{Context: rc, Mutations: []*kvrpcpb.Mutation{{Op: kvrpcpb.Op_Insert, Key: []byte("a")}}, PrimaryLock: []byte("a"), StartVersion: 1 << 62},
		&kvrpcpb.CommitRequest{Context: rc, Keys: [][]byte{[]byte("l")}, StartVersion: 1, CommitVersion: 1},
	}
	for i, s := range seeds {
		b, err := s.(interface{ Marshal() ([]byte, error) }).Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(i), b)
	}
	s := offlineServers(f)
	kv := &tikvServer{s: s, storeID: 1}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, kind uint8, data []byte) {
		switch kind % 12 {
		case 0:
			r := &kvrpcpb.GetRequest{}
			if r.Unmarshal(data) == nil {
				_, _ = kv.KvGet(ctx, r)
			}
		case 1:
			r := &kvrpcpb.ScanRequest{}
			if r.Unmarshal(data) == nil {
				_, _ = kv.KvScan(ctx, r)
			}
		case 2:
			r := &kvrpcpb.ScanLockRequest{}
			if r.Unmarshal(data) == nil {
				_, _ = kv.KvScanLock(ctx, r)
			}
		case 3:
			r := &kvrpcpb.ResolveLockRequest{}
			if r.Unmarshal(data) == nil {
				_, _ = kv.KvResolveLock(ctx, r)
			}
		case 4:
			r := &kvrpcpb.BatchGetRequest{}
			if r.Unmarshal(data) == nil {
				_, _ = kv.KvBatchGet(ctx, r)
			}
		case 5:
			r := &kvrpcpb.CheckTxnStatusRequest{}
			if r.Unmarshal(data) == nil {
				_, _ = kv.KvCheckTxnStatus(ctx, r)
			}
		case 6:
			r := &kvrpcpb.CheckSecondaryLocksRequest{}
			if r.Unmarshal(data) == nil {
				_, _ = kv.KvCheckSecondaryLocks(ctx, r)
			}
		case 7:
			r := &kvrpcpb.TxnHeartBeatRequest{}
			if r.Unmarshal(data) == nil {
				_, _ = kv.KvTxnHeartBeat(ctx, r)
			}
		case 8:
			r := &kvrpcpb.PrewriteRequest{}
			if r.Unmarshal(data) == nil {
				_, _ = kv.KvPrewrite(ctx, r)
			}
		case 9:
			r := &kvrpcpb.CommitRequest{}
			if r.Unmarshal(data) == nil {
				_, _ = kv.KvCommit(ctx, r)
			}
		case 10:
			r := &kvrpcpb.BatchRollbackRequest{}
			if r.Unmarshal(data) == nil {
				_, _ = kv.KvBatchRollback(ctx, r)
			}
		case 11:
			r := &kvrpcpb.CleanupRequest{}
			if r.Unmarshal(data) == nil {
				_, _ = kv.KvCleanup(ctx, r)
			}
		}
	})
}

// FuzzChangeDataRequests: no change-data request (any header, version,
// region, epoch, range, request kind) makes the protocol layer or the
// feed panic, in multiplexed and v1 mode. (G50-G57)
func FuzzChangeDataRequests(f *testing.F) {
	seed := &cdcpb.ChangeDataRequest{Header: &cdcpb.Header{ClusterId: DefaultClusterID, TicdcVersion: "6.5.0"},
		RegionId: 1, RegionEpoch: &metapb.RegionEpoch{ConfVer: 1, Version: 2}, RequestId: 1, StartKey: []byte{0x74}, EndKey: []byte{0x75}}
	b, err := seed.Marshal()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(false, b, b)
	f.Add(true, b, []byte{})
	s := offlineServers(f)
	cs := &cdcServer{s: s, storeID: 1}
	f.Fuzz(func(t *testing.T, mux bool, a, b []byte) {
		fs, err := s.c.OpenStream(1)
		if err != nil {
			t.Fatal(err)
		}
		defer fs.Close()
		cn := &conn{mux: mux, active: map[uint64]uint64{}}
		for _, data := range [][]byte{a, b} {
			req := &cdcpb.ChangeDataRequest{}
			if req.Unmarshal(data) != nil {
				continue
			}
			cs.handle(cn, fs, req)
		}
		s.c.DeliverAll()
		evs, _ := fs.Recv()
		_ = cn.translate(cn.pending, evs)
	})
}
