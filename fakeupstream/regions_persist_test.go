package fakeupstream_test

import (
	"fmt"
	"testing"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/topology"
)

func layout(rs []topology.Region) string {
	s := ""
	for _, r := range rs {
		s += fmt.Sprintf("%d [%x,%x) v%d c%d leader %d peers %v\n", r.ID, r.StartKey, r.EndKey, r.Version, r.ConfVer, r.Leader, r.Peers)
	}
	return s
}

// Rule DUR-9: splits, merges, peer changes and leader moves survive a
// reopen with their ids and epochs, and ids handed out after the reopen
// are new (the allocator's next id is persisted with the layout).
func TestDUR9RegionsPersist(t *testing.T) {
	dir := t.TempDir()
	c := openDir(t, dir, fakeupstream.Config{Seed: 1})
	for i := 1; i <= 6; i++ {
		if _, _, err := c.SplitRaw(key(i * 10)); err != nil {
			t.Fatal(err)
		}
	}
	rs := c.Regions()
	if _, err := c.Merge(rs[2].ID, rs[3].ID); err != nil {
		t.Fatal(err)
	}
	rs = c.Regions()
	if err := c.TransferLeader(rs[1].ID, 2); err != nil {
		t.Fatal(err)
	}
	if err := c.RemovePeer(rs[4].ID, 3); err != nil {
		t.Fatal(err)
	}
	want := layout(c.Regions())
	maxID := uint64(0)
	for _, r := range c.Regions() {
		maxID = max(maxID, r.ID)
		for _, p := range r.Peers {
			maxID = max(maxID, p.ID)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = openDir(t, dir, fakeupstream.Config{Seed: 1})
	defer c.Close()
	if got := layout(c.Regions()); got != want {
		t.Fatalf("layout after reopen:\n%s\nwant:\n%s", got, want)
	}
	if err := c.CheckTopology(); err != nil {
		t.Fatal(err)
	}
	left, _, err := c.SplitRaw(key(5))
	if err != nil {
		t.Fatal(err)
	}
	if left.ID <= maxID {
		t.Fatalf("split after reopen reused id %d (ids up to %d were handed out)", left.ID, maxID)
	}
	for _, p := range left.Peers {
		if p.ID <= maxID {
			t.Fatalf("peer id %d reused", p.ID)
		}
	}
}
