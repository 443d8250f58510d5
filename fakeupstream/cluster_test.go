package fakeupstream_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/mvcc"
	"github.com/searchfabric/sfemu/fakeupstream/tso"
	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
)

var _ kvevent.SnapshotReader = (*fakeupstream.Cluster)(nil)

// Rule C-1 / C-4: a txn reads its own buffered writes over the snapshot at
// its start ts; committed data is visible from the commit ts on.
func TestTxnReadYourWritesAndSnapshot(t *testing.T) {
	c := newCluster(t, 1)
	ctx := context.Background()
	c.Put([]byte("a"), []byte("1"))
	c.Put([]byte("b"), []byte("1"))
	tx := c.Begin()
	tx.Set([]byte("a"), []byte("2"))
	tx.Delete([]byte("b"))
	tx.Set([]byte("c"), []byte("3"))
	if v, _ := tx.Get([]byte("a")); string(v) != "2" {
		t.Fatalf("own write: %q", v)
	}
	if v, _ := tx.Get([]byte("b")); v != nil {
		t.Fatalf("own delete: %q", v)
	}
	kvs, err := tx.Scan(nil, nil, 0)
	if err != nil || len(kvs) != 2 || string(kvs[0].Key) != "a" || string(kvs[1].Value) != "3" {
		t.Fatalf("txn scan: %v %v", kvs, err)
	}
	before := c.Oracle().Next()
	commitTs, err := tx.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := c.Get(ctx, []byte("a"), before); string(v) != "1" {
		t.Fatalf("snapshot before commit: %q", v)
	}
	if v, _ := c.Get(ctx, []byte("a"), commitTs); string(v) != "2" {
		t.Fatalf("snapshot at commit: %q", v)
	}
	kvs2, _ := c.Scan(ctx, nil, nil, commitTs, 0)
	if len(kvs2) != 2 {
		t.Fatalf("scan at commit: %v", kvs2)
	}
	if tso.Physical(commitTs) != fakeupstream.DefaultStartMs {
		t.Fatalf("virtual clock not used: %d", tso.Physical(commitTs))
	}
}

// Rule C-3 / MVCC-2: a lock left behind blocks readers at or above its start ts until the
// resolver clears it; a read below it is fine.
func TestAbandonedLockBlocksUntilResolved(t *testing.T) {
	c := newCluster(t, 1)
	ctx := context.Background()
	tx := c.Begin()
	tx.SetTTL(100)
	tx.Set([]byte("k"), []byte("v"))
	if err := tx.Prewrite(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, []byte("k"), c.Oracle().Next()); !errors.Is(err, mvcc.ErrLocked) {
		t.Fatalf("want lock error, got %v", err)
	}
	if _, err := c.Get(ctx, []byte("k"), tx.StartTs()-1); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.ResolveLocks(nil, nil, c.Oracle().Next()); n != 0 {
		t.Fatal("live lock (TTL not expired) must not be resolved")
	}
	c.Advance(200 * time.Millisecond)
	if n, err := c.ResolveLocks(nil, nil, c.Oracle().Next()); n != 1 || err != nil {
		t.Fatalf("resolve: %d %v", n, err)
	}
	if v, err := c.Get(ctx, []byte("k"), c.Oracle().Next()); v != nil || err != nil {
		t.Fatalf("after rollback: %q %v", v, err)
	}
	if _, err := tx.Commit(); !errors.As(err, new(*mvcc.TxnRolledBackError)) {
		t.Fatalf("commit after resolver rollback: %v", err)
	}
}

// Rule C-2 / C-3: a txn whose primary committed but whose secondary was left locked is
// finished by the resolver at the primary's commit ts.
func TestResolverCommitsSecondaries(t *testing.T) {
	c := newCluster(t, 1)
	tx := c.Begin()
	tx.Set([]byte("p"), []byte("1"))
	tx.Set([]byte("s"), []byte("2"))
	tx.Prewrite()
	ts := c.Oracle().Next()
	if err := tx.CommitKeys(ts, []byte("p")); err != nil {
		t.Fatal(err)
	}
	if n, err := c.ResolveLocks(nil, nil, c.Oracle().Next()); n != 1 || err != nil {
		t.Fatalf("resolve %d %v", n, err)
	}
	if v, _ := c.Get(context.Background(), []byte("s"), ts); string(v) != "2" {
		t.Fatalf("secondary at commit ts: %q", v)
	}
	st := c.CheckTxnStatus([]byte("p"), tx.StartTs())
	if st.CommitTs != ts {
		t.Fatalf("status %+v", st)
	}
}

// Rule C-3 / MVCC-6: async commit: the resolver commits from the locks alone.
func TestResolverAsyncCommit(t *testing.T) {
	c := newCluster(t, 1)
	tx := c.Begin()
	tx.UseAsyncCommit()
	tx.Set([]byte("p"), []byte("1"))
	tx.Set([]byte("s"), []byte("2"))
	tx.Prewrite()
	if n, err := c.ResolveLocks(nil, nil, c.Oracle().Next()); n != 2 || err != nil {
		t.Fatalf("resolve %d %v", n, err)
	}
	if v, _ := c.Get(context.Background(), []byte("s"), tx.MinCommitTs()); string(v) != "2" {
		t.Fatalf("async secondary: %q", v)
	}
}

// Rule F-10: topology changes in the middle of a transaction do not disturb it.
func TestSplitMergeLeaderMidTxn(t *testing.T) {
	c := newCluster(t, 1)
	k1, k2 := tablecodec.EncodeIntRecordKey(nil, 5, 1), tablecodec.EncodeIntRecordKey(nil, 5, 100)
	tx := c.Begin()
	tx.Set(k1, []byte("a"))
	tx.Set(k2, []byte("b"))
	if err := tx.Prewrite(k2); err != nil {
		t.Fatal(err)
	}
	left, right, err := c.SplitRaw(tablecodec.EncodeIntRecordKey(nil, 5, 50))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.TransferLeader(right.ID, 3); err != nil {
		t.Fatal(err)
	}
	if err := tx.Prewrite(k1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Merge(left.ID, right.ID); err != nil {
		t.Fatal(err)
	}
	ts, err := tx.Commit()
	if err != nil {
		t.Fatal(err)
	}
	kvs, _ := c.Scan(context.Background(), tablecodec.EncodeRecordPrefix(nil, 5), tablecodec.EncodeRecordPrefix(nil, 6), ts, 0)
	if len(kvs) != 2 {
		t.Fatalf("rows %v", kvs)
	}
	if err := c.CheckTopology(); err != nil {
		t.Fatal(err)
	}
	if r := c.LocateRaw(k1); !bytes.Equal(r.StartKey, nil) || r.ID != right.ID {
		t.Fatalf("merged region %+v", r)
	}
}

// Rule C-4 / MVCC-7: GC through the SnapshotReader.
func TestGCThroughCluster(t *testing.T) {
	c := newCluster(t, 1)
	ctx := context.Background()
	old, _ := c.Put([]byte("a"), []byte("1"))
	c.Put([]byte("a"), []byte("2"))
	sp := c.Oracle().Next()
	c.GC(sp)
	if got, _ := c.GCSafePoint(ctx); got != sp {
		t.Fatalf("safe point %d", got)
	}
	if _, err := c.Get(ctx, []byte("a"), old); !errors.Is(err, mvcc.ErrGCTooEarly) {
		t.Fatalf("read below safe point: %v", err)
	}
	if v, _ := c.Get(ctx, []byte("a"), sp); string(v) != "2" {
		t.Fatalf("at safe point: %q", v)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Get(cctx, []byte("a"), sp); err == nil {
		t.Fatal("cancelled ctx must fail")
	}
}

// Rule TSO (wall clock) / SRC-1: the real-time driver delivers rows and
// advances resolved ts without virtual time.
func TestRealClockMode(t *testing.T) {
	c, err := fakeupstream.New(fakeupstream.Config{RealClock: true, Feed: cdcfeedConfig(5)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Advance(time.Second); !errors.Is(err, fakeupstream.ErrRealClock) {
		t.Fatalf("Advance on a wall clock: %v", err)
	}
	src := c.NewSource(fakeupstream.SourceConfig{PollInterval: time.Millisecond})
	rec := &syncRecorder{}
	start := c.Oracle().Next()
	if err := src.Subscribe(context.Background(), 1, tablecodec.TableRecordSpan(0, false, tableID), start, rec); err != nil {
		t.Fatal(err)
	}
	ts, _ := c.Put(rowKey(1), []byte("v"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	for rec.get() <= ts {
		select {
		case <-ctx.Done():
			t.Fatalf("resolved ts never passed %d", ts)
		case <-time.After(2 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	src.Close()
	if rec.rows() != 1 {
		t.Fatalf("rows %d", rec.rows())
	}
}

func BenchmarkCommit1PCSingleRow(b *testing.B) {
	c, _ := fakeupstream.New(fakeupstream.Config{Seed: 1})
	val := bytes.Repeat([]byte("v"), 64)
	key := make([]byte, 0, 19)
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		key = tablecodec.EncodeIntRecordKey(key[:0], tableID, int64(i))
		if _, err := c.Put(key, val); err != nil {
			b.Fatal(err)
		}
	}
	reportRows(b, cpu0)
}

// With a subscribed Source: commits flow through the feed and the puller
// core to a consumer.
func BenchmarkCommit1PCWithSource(b *testing.B) {
	c, _ := fakeupstream.New(fakeupstream.Config{Seed: 1})
	for h := int64(1); h < 8; h++ {
		c.SplitRaw(rowKey(h * 1 << 20))
	}
	src := c.NewSource(fakeupstream.SourceConfig{})
	src.Subscribe(context.Background(), 1, tablecodec.TableRecordSpan(0, false, tableID), c.Oracle().Next(), &countRecorder{})
	src.Pump()
	val := bytes.Repeat([]byte("v"), 64)
	key := make([]byte, 0, 19)
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		key = tablecodec.EncodeIntRecordKey(key[:0], tableID, int64(i*7919)%(8<<20))
		if _, err := c.Put(key, val); err != nil {
			b.Fatal(err)
		}
		if i%256 == 255 {
			if err := src.Pump(); err != nil {
				b.Fatal(err)
			}
		}
	}
	src.Pump()
	reportRows(b, cpu0)
}

// Concurrency: writers on several goroutines while Source.Run delivers on
// another; every row arrives (run under -race in CI).
func TestConcurrentWritersWithRun(t *testing.T) {
	c, err := fakeupstream.New(fakeupstream.Config{RealClock: true, Feed: cdcfeedConfig(2)})
	if err != nil {
		t.Fatal(err)
	}
	c.SplitRaw(rowKey(500))
	src := c.NewSource(fakeupstream.SourceConfig{PollInterval: time.Millisecond})
	rec := &syncRecorder{}
	if err := src.Subscribe(context.Background(), 1, tablecodec.TableRecordSpan(0, false, tableID), c.Oracle().Next(), rec); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	const writers, perWriter = 4, 100
	errs := make(chan error, writers)
	var last [writers]uint64
	for w := 0; w < writers; w++ {
		go func(w int) {
			for i := 0; i < perWriter; i++ {
				tx := c.Begin()
				tx.Set(rowKey(int64(w*250+i)), []byte("v"))
				var ts uint64
				var err error
				if i%2 == 0 {
					ts, err = tx.Commit()
				} else {
					ts, err = tx.Commit1PC()
				}
				if err != nil {
					errs <- err
					return
				}
				last[w] = ts
			}
			errs <- nil
		}(w)
	}
	for w := 0; w < writers; w++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	var maxTs uint64
	for _, ts := range last {
		maxTs = max(maxTs, ts)
	}
	for rec.get() <= maxTs {
		select {
		case <-ctx.Done():
			t.Fatalf("resolved ts %d never passed %d (rows %d)", rec.get(), maxTs, rec.rows())
		case <-time.After(2 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if rec.rows() != writers*perWriter {
		t.Fatalf("rows %d, want %d", rec.rows(), writers*perWriter)
	}
}
