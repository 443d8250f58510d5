package fakeupstream_test

import (
	"fmt"
	"math/rand"
	"sort"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/fakeupstream"
)

// Rule C-5: a savepoint puts the buffer back exactly (keys written since
// dropped, keys overwritten restored, the primary too); Discard leaves no
// trace in the store.
func TestC5SavepointAndDiscard(t *testing.T) {
	c := newCluster(t, 1)
	tx := c.Begin()
	for i := 0; i < 20; i++ { // past the small-txn size: map and btree
		tx.Set([]byte(fmt.Sprintf("k%02d", i)), []byte("v1"))
	}
	tx.Savepoint()
	tx.Set([]byte("k03"), []byte("v2"))
	tx.Delete([]byte("k04"))
	tx.Set([]byte("new"), []byte("x"))
	if err := tx.RollbackToSavepoint(); err != nil {
		t.Fatal(err)
	}
	if tx.Len() != 20 {
		t.Fatalf("buffer has %d keys after rollback to savepoint, want 20", tx.Len())
	}
	for _, k := range []string{"k03", "k04"} {
		if v, _ := tx.Get([]byte(k)); string(v) != "v1" {
			t.Fatalf("%s = %q after rollback to savepoint", k, v)
		}
	}
	if v, _ := tx.Get([]byte("new")); v != nil {
		t.Fatalf("new = %q after rollback to savepoint", v)
	}
	kvs, err := tx.Scan(nil, nil, 0)
	if err != nil || len(kvs) != 20 {
		t.Fatalf("scan after rollback to savepoint: %d pairs, %v", len(kvs), err)
	}
	// An empty txn's savepoint resets its primary.
	tx2 := c.Begin()
	tx2.Savepoint()
	tx2.Set([]byte("p"), []byte("1"))
	if err := tx2.RollbackToSavepoint(); err != nil || tx2.Primary() != nil {
		t.Fatalf("primary %q after rollback, %v", tx2.Primary(), err)
	}
	tx2.Set([]byte("q"), []byte("1"))
	if string(tx2.Primary()) != "q" {
		t.Fatalf("primary %q", tx2.Primary())
	}
	if err := tx.Discard(); err != nil {
		t.Fatal(err)
	}
	if n := len(c.ScanLocks(nil, nil, ^uint64(0))); n != 0 {
		t.Fatalf("%d locks after discard", n)
	}
	if _, err := tx2.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := tx2.Discard(); err == nil {
		t.Fatal("discard after commit succeeded")
	}
}

// Rule C-1: Txn.Scan with a limit pages through the store and merges the
// buffer exactly (seeded against a map model, any buffer size).
func TestC1TxnScanPagesMergeBuffer(t *testing.T) {
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	c := newCluster(t, 1)
	model := map[string]string{}
	for i := 0; i < 300; i++ {
		k := fmt.Sprintf("k%03d", rng.Intn(400))
		if _, err := c.Put([]byte(k), []byte("s")); err != nil {
			t.Fatal(err)
		}
		model[k] = "s"
	}
	tx := c.Begin()
	for i := 0; i < 200; i++ {
		k := fmt.Sprintf("k%03d", rng.Intn(400))
		switch rng.Intn(3) {
		case 0:
			tx.Delete([]byte(k))
			delete(model, k)
		default:
			tx.Set([]byte(k), []byte("b"))
			model[k] = "b"
		}
	}
	var want []string
	for k, v := range model {
		want = append(want, k+"="+v)
	}
	sort.Strings(want)
	for _, limit := range []int{1, 3, 7, 64, 0} {
		var got []string
		cur := []byte("k")
		for {
			kvs, err := tx.Scan(cur, []byte("l"), limit)
			if err != nil {
				t.Fatal(err)
			}
			for _, kv := range kvs {
				got = append(got, string(kv.Key)+"="+string(kv.Value))
			}
			if limit <= 0 || len(kvs) < limit {
				break
			}
			if len(kvs) > limit {
				t.Fatalf("seed %d: %d pairs for limit %d", seed, len(kvs), limit)
			}
			cur = append(kvs[len(kvs)-1].Key, 0)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("seed %d limit %d:\n got %v\nwant %v", seed, limit, got, want)
		}
	}
	_ = fakeupstream.ErrClosed
}
