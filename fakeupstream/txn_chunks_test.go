package fakeupstream_test

import (
	"fmt"
	"testing"
)

// TestMVCC12ChunkedBufferAcrossChunks (MVCC-12): a txn's buffer spans
// several chunks (1024 mutations each) and behaves as one: a savepoint
// rolled back across a chunk boundary restores it exactly, reads see it;
// the whole-buffer commit hands it to the store (the txn then reads
// nothing: its buffer is gone) and commits every key; a prewritten
// buffer rolls back through what the store holds.
func TestMVCC12ChunkedBufferAcrossChunks(t *testing.T) {
	c := newCluster(t, 1)
	key := func(i int) []byte { return []byte(fmt.Sprintf("k%05d", i)) }
	tx := c.Begin()
	for i := 0; i < 1500; i++ {
		tx.Set(key(i), []byte("v1"))
	}
	tx.Savepoint()
	for i := 1000; i < 2600; i++ { // overwrites 1000..1499, adds 1500..2599
		tx.Set(key(i), []byte("v2"))
	}
	if err := tx.RollbackToSavepoint(); err != nil {
		t.Fatal(err)
	}
	if tx.Len() != 1500 {
		t.Fatalf("%d keys after the rollback to savepoint, want 1500", tx.Len())
	}
	for _, i := range []int{0, 1023, 1024, 1499} {
		if v, err := tx.Get(key(i)); err != nil || string(v) != "v1" {
			t.Fatalf("k%d = %q, %v", i, v, err)
		}
	}
	tx.Set(key(2000), []byte("v3")) // a new chunk after the truncation
	kvs, err := tx.Scan(nil, nil, 0)
	if err != nil || len(kvs) != 1501 || string(kvs[1500].Value) != "v3" {
		t.Fatalf("scan: %d pairs, %v", len(kvs), err)
	}
	ts, err := tx.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Get(key(0)); err == nil {
		t.Fatal("a read after the whole buffer was handed over succeeded")
	}
	rows, err := c.Scan(t.Context(), nil, nil, ts, 0)
	if err != nil || len(rows) != 1501 {
		t.Fatalf("committed %d rows, %v", len(rows), err)
	}
	if n := len(c.ScanLocks(nil, nil, ^uint64(0))); n != 0 {
		t.Fatalf("%d locks left after the commit", n)
	}

	tx2 := c.Begin()
	for i := 0; i < 3000; i++ {
		tx2.Set(key(i), []byte("v4"))
	}
	if err := tx2.Prewrite(); err != nil {
		t.Fatal(err)
	}
	if n := len(c.ScanLocks(nil, nil, ^uint64(0))); n != 3000 || tx2.Len() != 3000 {
		t.Fatalf("%d locks, txn holds %d keys, want 3000", n, tx2.Len())
	}
	if err := tx2.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := len(c.ScanLocks(nil, nil, ^uint64(0))); n != 0 {
		t.Fatalf("%d locks left after the rollback", n)
	}
}
