package fakeupstream

import (
	"testing"

	"github.com/searchfabric/sfemu/fakeupstream/mvcc"
)

// DUR-3: the feed's lock in a durable cluster is granted only when every
// applied change is on disk, so Stream.Recv never hands out a row a crash
// could take back; in memory the feed uses the cluster mutex itself.
func TestDurableFeedLockWaitsForDisk(t *testing.T) {
	c, err := New(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < 3; i++ {
		// Apply a commit the way a concurrent committer does: in memory
		// under c.mu, durable only after it releases c.mu.
		c.mu.Lock()
		ts := c.oracle.Next()
		if err := c.store.OnePC([]mvcc.Mutation{{Op: mvcc.OpPut, Key: []byte{byte(i)}, Value: []byte("v")}}, ts-1, ts); err != nil {
			t.Fatal(err)
		}
		c.mu.Unlock()
		if !c.log.Pending() {
			t.Fatal("test setup: the change should not be durable yet")
		}
		l := durableLocker{c}
		l.Lock()
		pending := c.log.Pending()
		l.Unlock()
		if pending {
			t.Fatal("feed lock granted while applied changes are not durable")
		}
	}
}
