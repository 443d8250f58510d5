package fakeupstream_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/searchfabric/sfemu/fakeupstream"
)

// TestDUR12MaintenanceGCAndCompaction: a round of background maintenance
// raises the safe point to what the GC policy allows, and compacts the
// log once it is at least MinBytes and twice its size after the last
// compaction: the rewritten log holds the live state only (versions below
// the safe point gone), reads at or above the safe point answer the same
// before, after and after a reopen, reads below it fail; a round with
// nothing new to do leaves the log alone. rule: DUR-12
func TestDUR12MaintenanceGCAndCompaction(t *testing.T) {
	dir := t.TempDir()
	cfg := fakeupstream.Config{Seed: 4, Maintain: fakeupstream.MaintainConfig{Off: true, MinBytes: 1}}
	c := openDir(t, dir, cfg)
	defer c.Close()
	var tss []uint64
	for i := 0; i < 400; i++ {
		ts, err := c.Put(key(i%20), []byte(fmt.Sprintf("v%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		tss = append(tss, ts)
	}
	sp := tss[300]
	policyCalls := 0
	c.SetGCPolicy(func(now uint64) uint64 {
		policyCalls++
		if now <= tss[len(tss)-1] {
			t.Errorf("the policy got now=%d, not above the last commit %d", now, tss[len(tss)-1])
		}
		return sp
	})
	readAt := tss[300:]
	// The same reads, with the safe point the round will set.
	want := strings.Replace(dumpState(t, c, readAt), "gc 0\n", fmt.Sprintf("gc %d\n", sp), 1)
	before := c.LogSize()
	if err := c.RunMaintenance(); err != nil {
		t.Fatal(err)
	}
	if policyCalls != 1 {
		t.Fatalf("policy called %d times", policyCalls)
	}
	if got, _ := c.GCSafePoint(context.Background()); got != sp {
		t.Fatalf("safe point %d, want %d", got, sp)
	}
	after := c.LogSize()
	if after*3 > before {
		t.Fatalf("log %d bytes after compaction, %d before: 380 dead versions should be gone", after, before)
	}
	if got := dumpState(t, c, readAt); got != want {
		t.Fatalf("after compaction:\n%s\nwant:\n%s", got, want)
	}
	if _, err := c.Get(context.Background(), key(1), tss[100]); err == nil {
		t.Fatal("a read below the safe point succeeded")
	}
	// Nothing new: no rewrite.
	if err := c.RunMaintenance(); err != nil {
		t.Fatal(err)
	}
	if c.LogSize() != after {
		t.Fatalf("an idle round rewrote the log: %d -> %d bytes", after, c.LogSize())
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	r := openDir(t, dir, cfg)
	defer r.Close()
	if got := dumpState(t, r, readAt); got != want {
		t.Fatalf("after reopen:\n%s\nwant:\n%s", got, want)
	}
	if r.Restored().Size != after {
		t.Fatalf("reopened log is %d bytes, the compacted one %d", r.Restored().Size, after)
	}
}

// TestDUR12BackgroundLoopStopsOnClose: a durable cluster runs its
// maintenance loop until Close, which waits for it (no goroutine is left
// writing to a closed directory). rule: DUR-12
func TestDUR12BackgroundLoopStopsOnClose(t *testing.T) {
	dir := t.TempDir()
	c := openDir(t, dir, fakeupstream.Config{Maintain: fakeupstream.MaintainConfig{Interval: 1, MinBytes: 1}})
	for i := 0; i < 50; i++ {
		if _, err := c.Put(key(i%5), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.MaintainErr(); err != nil {
		t.Fatalf("maintenance: %v", err)
	}
	r := openDir(t, dir, fakeupstream.Config{Maintain: fakeupstream.MaintainConfig{Off: true}})
	defer r.Close()
	for i := 0; i < 5; i++ {
		if v, err := r.Get(context.Background(), key(i), ^uint64(0)>>1); err != nil || string(v) != "x" {
			t.Fatalf("key %d after reopen: %q %v", i, v, err)
		}
	}
}

// TestDUR11CompactionWithConcurrentWriters: writers commit on other
// goroutines while compactions run; every commit acknowledged before
// Close is read back, with its value, after a reopen. rule: DUR-11
func TestDUR11CompactionWithConcurrentWriters(t *testing.T) {
	dir := t.TempDir()
	cfg := fakeupstream.Config{Seed: 5, Maintain: fakeupstream.MaintainConfig{Off: true}}
	c := openDir(t, dir, cfg)
	for i := 0; i < 300; i++ {
		if _, err := c.Put(key(i), []byte("seed")); err != nil {
			t.Fatal(err)
		}
	}
	type ack struct {
		k  int
		v  string
		ts uint64
	}
	acks := make(chan ack, 4096)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				// Each writer has its own 100 keys: writers sharing a key
				// would meet real write conflicts (two 1PC transactions
				// whose start and commit interleave), not what this tests.
				k := w*100 + (i*37)%100
				v := fmt.Sprintf("w%d-%d", w, i)
				ts, err := c.Put(key(k), []byte(v))
				if err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
				acks <- ack{k, v, ts}
				if i >= 400 {
					return
				}
			}
		}(w)
	}
	for i := 0; i < 3; i++ {
		if _, err := c.Compact(); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	close(acks)
	last := map[int]ack{}
	for a := range acks {
		if a.ts > last[a.k].ts {
			last[a.k] = a
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	r := openDir(t, dir, cfg)
	defer r.Close()
	for k, a := range last {
		v, err := r.Get(context.Background(), key(k), a.ts)
		if err != nil || string(v) != a.v {
			t.Fatalf("key %d at %d after reopen: %q %v, want %q", k, a.ts, v, err, a.v)
		}
	}
}

// TestDUR12CompactionGrowthFactor: MaintainConfig.Growth sets how much the
// log may grow past its size after the last compaction before the next
// one (default 2): below it a round leaves the log alone, at it the round
// compacts, and Compactions counts it. rule: DUR-12
func TestDUR12CompactionGrowthFactor(t *testing.T) {
	c := openDir(t, t.TempDir(), fakeupstream.Config{Seed: 4, Maintain: fakeupstream.MaintainConfig{Off: true, MinBytes: 1, Growth: 1.5}})
	defer c.Close()
	put := func(n int) {
		for i := 0; i < n; i++ {
			if _, err := c.Put(key(i%20), []byte(fmt.Sprintf("v%d", i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	put(100)
	if err := c.RunMaintenance(); err != nil {
		t.Fatal(err)
	}
	n, st := c.Compactions()
	if n != 1 || st.After != c.LogSize() {
		t.Fatalf("%d compactions (last %+v), log %d: want the first round to compact", n, st, c.LogSize())
	}
	// growTo writes until the log reaches size, runs one round and checks
	// the number of compactions so far.
	growTo := func(size int64, want int, what string) {
		t.Helper()
		for c.LogSize() < size {
			put(1)
		}
		if err := c.RunMaintenance(); err != nil {
			t.Fatal(err)
		}
		if n, _ := c.Compactions(); n != want {
			t.Fatalf("at %d bytes: %d compactions, want %d (%s)", c.LogSize(), n, want, what)
		}
	}
	base := c.LogSize()
	growTo(base*3/2-64, 1, "below 1.5 x the base")
	growTo(base*3/2, 2, "1.5 x the base reached")
	// A lowered factor applies from the next round.
	c.SetCompactGrowth(1.2)
	growTo(c.LogSize()*6/5, 3, "1.2 x reached after SetCompactGrowth")
}
