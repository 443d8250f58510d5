package topology

import (
	"bytes"
	"flag"
	"math/rand"
	"testing"
)

var seedFlag = flag.Int64("seed", 1, "seed for randomized topology tests")

func TestNewSingleRegion(t *testing.T) {
	tp, err := New(3, 3)
	if err != nil {
		t.Fatal(err)
	}
	rs := tp.Regions()
	if len(rs) != 1 || len(rs[0].StartKey) != 0 || len(rs[0].EndKey) != 0 || rs[0].Leader != 1 || len(rs[0].Peers) != 3 {
		t.Fatalf("initial region: %+v", rs)
	}
	if err := tp.Check(); err != nil {
		t.Fatal(err)
	}
	if _, err := New(2, 3); err == nil {
		t.Fatal("replicas > stores must fail")
	}
}

// Rule TOPO-2: split keeps the old id on the right part, both parts get
// version+1, conf_ver unchanged.
func TestSplitEpochs(t *testing.T) {
	tp, _ := New(3, 3)
	orig := tp.Regions()[0]
	left, right, err := tp.Split(orig.ID, []byte("m"))
	if err != nil {
		t.Fatal(err)
	}
	if right.ID != orig.ID || left.ID == orig.ID {
		t.Fatalf("right-derive broken: left %d right %d orig %d", left.ID, right.ID, orig.ID)
	}
	if left.Version != orig.Version+1 || right.Version != orig.Version+1 || left.ConfVer != orig.ConfVer || right.ConfVer != orig.ConfVer {
		t.Fatalf("epochs: left %+v right %+v", left, right)
	}
	if !bytes.Equal(left.EndKey, []byte("m")) || !bytes.Equal(right.StartKey, []byte("m")) {
		t.Fatalf("bounds: %s / %s", &left, &right)
	}
	if tp.Locate([]byte("a")).ID != left.ID || tp.Locate([]byte("m")).ID != right.ID || tp.Locate([]byte("z")).ID != right.ID {
		t.Fatal("locate after split")
	}
	if _, _, err := tp.Split(right.ID, []byte("m")); err == nil {
		t.Fatal("split at region start must fail")
	}
	if _, _, err := tp.Split(left.ID, []byte("n")); err == nil {
		t.Fatal("split outside region must fail")
	}
	if err := tp.Check(); err != nil {
		t.Fatal(err)
	}
}

// Rule TOPO-3: merge bumps source conf_ver/version and sets target version
// to max(source, target)+1; the source id disappears.
func TestMergeEpochs(t *testing.T) {
	tp, _ := New(1, 1)
	a, b, _ := tp.Split(tp.Regions()[0].ID, []byte("m"))
	b2, c, _ := tp.Split(b.ID, []byte("t")) // b2 = [m,t) new id, c = [t,+inf) old id
	// a: v2, b2: v3, c: v3
	merged, err := tp.Merge(b2.ID, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if merged.ID != a.ID || merged.Version != max(b2.Version+1, a.Version)+1 || !bytes.Equal(merged.EndKey, []byte("t")) {
		t.Fatalf("merged: %s", &merged)
	}
	if _, ok := tp.Region(b2.ID); ok {
		t.Fatal("source must disappear")
	}
	if _, err := tp.Merge(c.ID, 999); err == nil {
		t.Fatal("merge with unknown target")
	}
	tp2, _ := New(1, 1)
	x, y, _ := tp2.Split(tp2.Regions()[0].ID, []byte("b"))
	_, z, _ := tp2.Split(y.ID, []byte("c"))
	if _, err := tp2.Merge(x.ID, z.ID); err == nil {
		t.Fatal("non-adjacent merge must fail")
	}
	if err := tp.Check(); err != nil {
		t.Fatal(err)
	}
}

// Rule TOPO-4: peer changes bump conf_ver only; leader moves bump nothing.
func TestPeerAndLeaderEpochs(t *testing.T) {
	tp, _ := New(4, 3)
	r := tp.Regions()[0]
	if err := tp.AddPeer(r.ID, 4); err != nil {
		t.Fatal(err)
	}
	r2, _ := tp.Region(r.ID)
	if r2.ConfVer != r.ConfVer+1 || r2.Version != r.Version {
		t.Fatalf("add peer epoch %+v", r2)
	}
	if err := tp.TransferLeader(r.ID, 4); err != nil {
		t.Fatal(err)
	}
	r3, _ := tp.Region(r.ID)
	if r3.Leader != 4 || r3.ConfVer != r2.ConfVer || r3.Version != r2.Version {
		t.Fatalf("leader move epoch %+v", r3)
	}
	if err := tp.RemovePeer(r.ID, 4); err == nil {
		t.Fatal("removing the leader's peer must fail")
	}
	if err := tp.RemovePeer(r.ID, 1); err != nil {
		t.Fatal(err)
	}
	r4, _ := tp.Region(r.ID)
	if r4.ConfVer != r3.ConfVer+1 || r4.HasPeerOn(1) {
		t.Fatalf("remove peer %+v", r4)
	}
	if err := tp.TransferLeader(r.ID, 1); err == nil {
		t.Fatal("leader to a store without a peer must fail")
	}
}

// Rule TOPO-5: a store going down moves its leaders to the lowest up peer;
// with no up peer the region is leaderless until a store comes back.
func TestStoreDownReelects(t *testing.T) {
	tp, _ := New(3, 2) // peers on 1,2
	r := tp.Regions()[0]
	moved, err := tp.SetStoreUp(1, false)
	if err != nil || len(moved) != 1 {
		t.Fatalf("moved %v err %v", moved, err)
	}
	if got, _ := tp.Region(r.ID); got.Leader != 2 {
		t.Fatalf("leader %d, want 2", got.Leader)
	}
	if err := tp.TransferLeader(r.ID, 1); err == nil {
		t.Fatal("leader to a down store must fail")
	}
	tp.SetStoreUp(2, false)
	if got, _ := tp.Region(r.ID); got.Leader != 0 {
		t.Fatalf("leader %d, want none", got.Leader)
	}
	tp.SetStoreUp(1, true)
	if got, _ := tp.Region(r.ID); got.Leader != 1 {
		t.Fatalf("leader %d after store up, want 1", got.Leader)
	}
	if _, err := tp.SetStoreUp(9, true); err == nil {
		t.Fatal("unknown store")
	}
}

// Rule TOPO-1: random splits, merges and leader moves keep the key space
// covered with no overlap, ids unique, and every region's epoch never goes
// back.
func TestRandomOpsKeepInvariants(t *testing.T) {
	seed := *seedFlag
	rng := rand.New(rand.NewSource(seed))
	tp, _ := New(3, 3)
	lastVer := map[uint64]uint64{}
	for step := 0; step < 2000; step++ {
		rs := tp.Regions()
		r := rs[rng.Intn(len(rs))]
		switch rng.Intn(3) {
		case 0:
			k := []byte{byte(rng.Intn(256)), byte(rng.Intn(256))}
			if r.Contains(k) && !bytes.Equal(k, r.StartKey) {
				if _, _, err := tp.Split(r.ID, k); err != nil {
					t.Fatalf("seed %d step %d: %v", seed, step, err)
				}
			}
		case 1:
			if len(rs) > 1 {
				i := rng.Intn(len(rs) - 1)
				if _, err := tp.Merge(rs[i].ID, rs[i+1].ID); err != nil {
					t.Fatalf("seed %d step %d: %v", seed, step, err)
				}
			}
		case 2:
			if err := tp.TransferLeader(r.ID, uint64(1+rng.Intn(3))); err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
		}
		if err := tp.Check(); err != nil {
			t.Fatalf("seed %d step %d: %v", seed, step, err)
		}
		for _, r := range tp.Regions() {
			if r.Version < lastVer[r.ID] {
				t.Fatalf("seed %d step %d: region %d version went back", seed, step, r.ID)
			}
			lastVer[r.ID] = r.Version
			// Every probe key is found in exactly the region Locate names.
			if loc := tp.Locate(r.StartKey); loc.ID != r.ID || !loc.Contains(r.StartKey) {
				t.Fatalf("seed %d: locate", seed)
			}
		}
	}
}

func TestOverlappingAndMeta(t *testing.T) {
	tp, _ := New(1, 1)
	a, b, _ := tp.Split(tp.Regions()[0].ID, []byte("m"))
	got := tp.Overlapping([]byte("a"), []byte("m"))
	if len(got) != 1 || got[0].ID != a.ID {
		t.Fatalf("overlap [a,m): %v", got)
	}
	got = tp.Overlapping([]byte("l"), nil)
	if len(got) != 2 || got[1].ID != b.ID {
		t.Fatalf("overlap [l,+inf): %v", got)
	}
	m := b.Meta()
	if m.Id != b.ID || m.RegionEpoch.Version != b.Version || len(m.Peers) != 1 || m.Peers[0].StoreId != 1 {
		t.Fatalf("meta %v", m)
	}
}
