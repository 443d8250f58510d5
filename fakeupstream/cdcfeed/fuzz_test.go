package cdcfeed_test

import (
	"testing"

	"github.com/pingcap/kvproto/pkg/cdcpb"
	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	"github.com/pingcap/kvproto/pkg/metapb"
)

// FuzzRegister: any request a client can send, with any keys, ids and
// epochs, is answered (rows or a region error) and never panics the feed.
func FuzzRegister(f *testing.F) {
	f.Add(uint64(1), uint64(1), uint64(1), uint64(0), []byte{}, []byte{}, true, false)
	f.Add(uint64(1), uint64(1), uint64(2), uint64(5), cmp("a"), cmp("b"), false, false)
	f.Add(uint64(3), uint64(0), uint64(0), uint64(1), []byte{0xff, 0x01}, []byte{0x00}, true, true)
	f.Fuzz(func(t *testing.T, region, confVer, version, checkpoint uint64, start, end []byte, old, dereg bool) {
		c := newCluster(t, 1)
		c.SplitRaw([]byte("m"))
		put(t, c, "a", "1")
		put(t, c, "z", "1")
		s, err := c.OpenStream(1)
		if err != nil {
			t.Fatal(err)
		}
		req := &cdcpb.ChangeDataRequest{RegionId: region, RegionEpoch: &metapb.RegionEpoch{ConfVer: confVer, Version: version},
			CheckpointTs: checkpoint, StartKey: start, EndKey: end, RequestId: 1}
		if old {
			req.ExtraOp = kvrpcpb.ExtraOp_ReadOldValue
		}
		if dereg {
			req.Request = &cdcpb.ChangeDataRequest_Deregister_{Deregister: &cdcpb.ChangeDataRequest_Deregister{}}
		}
		if err := s.Send(req); err != nil {
			t.Fatal(err)
		}
		for _, r := range c.Regions() {
			s.Send(&cdcpb.ChangeDataRequest{RegionId: r.ID, RegionEpoch: r.Epoch(), CheckpointTs: checkpoint,
				StartKey: start, EndKey: end, RequestId: 2})
		}
		put(t, c, "b", "2")
		c.ResolvedRound()
		c.DeliverAll()
		if _, err := s.Recv(); err != nil {
			t.Fatal(err)
		}
	})
}
