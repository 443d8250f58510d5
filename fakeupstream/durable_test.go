package fakeupstream_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/kvlog"
	"github.com/searchfabric/sfemu/fakeupstream/tso"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
)

func openDir(t testing.TB, dir string, cfg fakeupstream.Config) *fakeupstream.Cluster {
	t.Helper()
	cfg.Dir = dir
	c, err := fakeupstream.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// dumpState renders what a client can observe: snapshot reads at each ts
// of tss and the locks.
func dumpState(t testing.TB, c *fakeupstream.Cluster, tss []uint64) string {
	t.Helper()
	var b strings.Builder
	for _, ts := range tss {
		kvs, err := c.Scan(context.Background(), nil, nil, ts, 0)
		if err != nil {
			fmt.Fprintf(&b, "@%d: %v\n", ts, err)
			continue
		}
		for _, kv := range kvs {
			fmt.Fprintf(&b, "@%d %x=%q\n", ts, kv.Key, kv.Value)
		}
	}
	for _, l := range c.ScanLocks(nil, nil, ^uint64(0)) {
		fmt.Fprintf(&b, "lock %x start=%d primary=%x op=%s async=%v min=%d sec=%x val=%q\n",
			l.Key, l.StartTs, l.Primary, l.Op, l.UseAsyncCommit, l.MinCommitTs, l.Secondaries, l.Value)
	}
	sp, _ := c.GCSafePoint(context.Background())
	fmt.Fprintf(&b, "gc %d\n", sp)
	return b.String()
}

func key(i int) []byte { return rowKey(int64(i)) }

// workload writes through every commit path and returns the timestamps
// worth reading at.
func durableWorkload(t testing.TB, c *fakeupstream.Cluster) []uint64 {
	t.Helper()
	var tss []uint64
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 20; i++ {
		ts, err := c.Put(key(i), []byte(fmt.Sprintf("v%d", i)))
		must(err)
		tss = append(tss, ts)
	}
	_, err := c.Put(key(30), nil) // empty value stays a put
	must(err)
	ts, err := c.Delete(key(3))
	must(err)
	tss = append(tss, ts)
	// 2PC over several keys.
	txn := c.Begin()
	for i := 5; i < 9; i++ {
		txn.Set(key(i), []byte(fmt.Sprintf("2pc%d", i)))
	}
	txn.Delete(key(9))
	txn.LockKey(key(10))
	ts, err = txn.Commit()
	must(err)
	tss = append(tss, ts)
	// Rolled back txn.
	rb := c.Begin()
	rb.Set(key(11), []byte("never"))
	must(rb.Prewrite())
	must(rb.Rollback())
	// GC between versions.
	c.GC(tss[len(tss)-2])
	// A txn left half committed: primary committed, secondary locked.
	half := c.Begin()
	half.Set(key(12), []byte("half-p"))
	half.Set(key(13), []byte("half-s"))
	must(half.Prewrite())
	cts := c.Oracle().Next()
	must(half.CommitKeys(cts, key(12)))
	tss = append(tss, cts)
	// An async-commit txn prewritten only (committed by its locks).
	as := c.Begin()
	as.UseAsyncCommit()
	as.Set(key(14), []byte("async-a"))
	as.Set(key(15), []byte("async-b"))
	must(as.Prewrite())
	ts, err = c.Put(key(16), []byte("last"))
	must(err)
	tss = append(tss, ts)
	return tss
}

// DUR-1: reopening a Dir restores every committed version, lock and the
// safe point; reads at old timestamps answer the same, new timestamps are
// above everything restored.
func TestDurableReopenRestoresState(t *testing.T) {
	dir := t.TempDir()
	c := openDir(t, dir, fakeupstream.Config{Seed: 1})
	tss := durableWorkload(t, c)
	before := dumpState(t, c, tss)
	last := c.Oracle().Peek()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(key(99), []byte("x")); !errors.Is(err, fakeupstream.ErrClosed) {
		t.Fatalf("put after Close: %v, want ErrClosed", err)
	}
	c2 := openDir(t, dir, fakeupstream.Config{Seed: 1})
	defer c2.Close()
	if after := dumpState(t, c2, tss); after != before {
		t.Fatalf("state after reopen:\n%s\nwant:\n%s", after, before)
	}
	if st := c2.Restored(); st.Records == 0 || st.TornBytes != 0 {
		t.Fatalf("restore stats %+v", st)
	}
	ts, err := c2.Put(key(40), []byte("new"))
	if err != nil {
		t.Fatal(err)
	}
	if ts <= last {
		t.Fatalf("commit ts %d after reopen is not above %d", ts, last)
	}
	// The resolver finishes the restored half-committed txn.
	if _, err := c2.ResolveLocks(nil, nil, ^uint64(0)); err != nil {
		t.Fatal(err)
	}
	v, err := c2.Get(context.Background(), key(13), ts)
	if err != nil || string(v) != "half-s" {
		t.Fatalf("secondary after resolve: %q %v", v, err)
	}
	v, err = c2.Get(context.Background(), key(15), ts)
	if err != nil || string(v) != "async-b" {
		t.Fatalf("async secondary after resolve: %q %v", v, err)
	}
}

// crashCopy copies the log as it is on disk now (what a kill -9 leaves:
// every written byte, nothing buffered) to a fresh Dir.
func crashCopy(t testing.TB, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, kvlog.FileName))
	if err != nil {
		t.Fatal(err)
	}
	to := t.TempDir()
	if err := os.WriteFile(filepath.Join(to, kvlog.FileName), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return to
}

// DUR-2, DUR-4: without Close, everything acknowledged survives; a torn
// last record is dropped and the log continues after it.
func TestDurableCrashKeepsAcknowledgedAndDropsTornTail(t *testing.T) {
	dir := t.TempDir()
	c := openDir(t, dir, fakeupstream.Config{Seed: 2})
	defer c.Close()
	tss := durableWorkload(t, c)
	want := dumpState(t, c, tss)

	crashed := crashCopy(t, dir)
	c2 := openDir(t, crashed, fakeupstream.Config{Seed: 2})
	if got := dumpState(t, c2, tss); got != want {
		t.Fatalf("after crash:\n%s\nwant:\n%s", got, want)
	}
	c2.Close()

	// Torn tails: half a frame header, a frame running past the end, a
	// last record with a bad checksum, a zero-filled tail.
	full := kvlog.AppendWrite(nil, key(77), &mvccPut, false)
	for name, tail := range map[string][]byte{
		"short header": {5, 0, 0},
		"short record": full[:len(full)-3],
		"bad checksum": append(append([]byte(nil), full[:len(full)-1]...), full[len(full)-1]^0xff),
		"zeros":        make([]byte, 4096),
	} {
		t.Run(name, func(t *testing.T) {
			d := crashCopy(t, dir)
			f, err := os.OpenFile(filepath.Join(d, kvlog.FileName), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write(tail)
			f.Close()
			c3 := openDir(t, d, fakeupstream.Config{Seed: 2})
			if st := c3.Restored(); st.TornBytes != int64(len(tail)) {
				t.Fatalf("torn bytes %d, want %d", st.TornBytes, len(tail))
			}
			if got := dumpState(t, c3, tss); got != want {
				t.Fatalf("after torn tail:\n%s\nwant:\n%s", got, want)
			}
			ts, err := c3.Put(key(78), []byte("after"))
			if err != nil {
				t.Fatal(err)
			}
			c3.Close()
			c4 := openDir(t, d, fakeupstream.Config{Seed: 2})
			defer c4.Close()
			if v, err := c4.Get(context.Background(), key(78), ts); err != nil || string(v) != "after" {
				t.Fatalf("write after the torn tail: %q %v", v, err)
			}
		})
	}
}

// DUR-4: damage before the tail is an error naming the file and offset.
func TestDurableCorruptRecordIsAnError(t *testing.T) {
	dir := t.TempDir()
	c := openDir(t, dir, fakeupstream.Config{Seed: 3})
	for i := 0; i < 10; i++ {
		if _, err := c.Put(key(i), bytes.Repeat([]byte{'x'}, 40)); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	path := filepath.Join(dir, kvlog.FileName)
	b, _ := os.ReadFile(path)
	b[len(b)/2] ^= 0x55
	os.WriteFile(path, b, 0o644)
	_, err := fakeupstream.New(fakeupstream.Config{Dir: dir})
	var ce *kvlog.CorruptError
	if !errors.As(err, &ce) || ce.File != path || ce.Off <= 0 || !strings.Contains(err.Error(), "offset") {
		t.Fatalf("err = %v, want a CorruptError naming %s and an offset", err, path)
	}
	// Not a log at all.
	os.WriteFile(path, []byte("hello world, not a log"), 0o644)
	if _, err := fakeupstream.New(fakeupstream.Config{Dir: dir}); !errors.As(err, &ce) || !strings.Contains(err.Error(), "magic") {
		t.Fatalf("err = %v, want bad magic", err)
	}
}

// DUR-5: a second cluster on an open Dir is refused; after Close it opens.
func TestDurableDirIsLocked(t *testing.T) {
	dir := t.TempDir()
	c := openDir(t, dir, fakeupstream.Config{})
	_, err := fakeupstream.New(fakeupstream.Config{Dir: dir})
	if !errors.Is(err, kvlog.ErrLocked) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("second open: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal("Close is idempotent:", err)
	}
	c2 := openDir(t, dir, fakeupstream.Config{})
	c2.Close()
}

// DUR-6: the TSO never hands out a ts at or below a persisted one, even
// when the clock is behind after a restart.
func TestDurableTSOMonotonicWithClockGoingBack(t *testing.T) {
	dir := t.TempDir()
	clk := tso.NewVirtualClock(fakeupstream.DefaultStartMs + 3600_000)
	c := openDir(t, dir, fakeupstream.Config{Clock: clk})
	var maxTs uint64
	for i := 0; i < 5; i++ {
		ts, err := c.Put(key(i), []byte("v"))
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(2 * time.Second)
		maxTs = max(maxTs, ts, c.Oracle().Next())
	}
	// A ts handed out but never used by a commit (a resolved ts, a PD
	// answer) is covered by the window too.
	issued := c.Oracle().Next()
	c.Close()

	back := tso.NewVirtualClock(fakeupstream.DefaultStartMs) // one hour back
	c2 := openDir(t, dir, fakeupstream.Config{Clock: back})
	defer c2.Close()
	if lim := c2.Restored().TSOLimit; lim < issued {
		t.Fatalf("persisted mark %d below an issued ts %d", lim, issued)
	}
	for i := 0; i < 100; i++ {
		ts := c2.Oracle().Next()
		if ts <= issued || ts <= maxTs {
			t.Fatalf("ts %d after restart is not above %d", ts, issued)
		}
	}
	ts, err := c2.Put(key(50), []byte("v"))
	if err != nil || ts <= issued {
		t.Fatalf("commit after restart at %d (issued before: %d): %v", ts, issued, err)
	}
	// And the crash case: the mark was saved before the ts was handed out.
	c3dir := crashCopy(t, dir)
	c3 := openDir(t, c3dir, fakeupstream.Config{Clock: tso.NewVirtualClock(0)})
	defer c3.Close()
	if n := c3.Oracle().Next(); n <= ts {
		t.Fatalf("ts %d after crash is not above %d", n, ts)
	}
}

// DUR-7: a Source on a reopened cluster delivers the persisted rows by
// incremental scan when it subscribes from an old ts.
func TestDurableSourceScansPersistedRows(t *testing.T) {
	dir := t.TempDir()
	cfg := fakeupstream.Config{Seed: 4, Feed: cdcfeedConfig(50)}
	c := openDir(t, dir, cfg)
	start := c.Oracle().Next()
	var want []string
	for i := 1; i <= 5; i++ {
		ts, err := c.Put(rowKey(int64(i)), []byte(fmt.Sprintf("v%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("%x@%d put v=v%d", rowKey(int64(i)), ts, i))
	}
	c.Close()

	c2 := openDir(t, dir, cfg)
	defer c2.Close()
	src := c2.NewSource(fakeupstream.SourceConfig{})
	rec := newRecorder()
	if err := src.Subscribe(context.Background(), 1, tablecodec.TableRecordSpan(0, false, tableID), start, rec); err != nil {
		t.Fatal(err)
	}
	ts6, err := c2.Put(rowKey(6), []byte("v6"))
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, fmt.Sprintf("%x@%d put v=v6", rowKey(6), ts6))
	for i := 0; i < 4; i++ {
		if err := src.Pump(); err != nil {
			t.Fatal(err)
		}
		c2.Advance(100 * time.Millisecond)
	}
	if got := strings.Join(rec.rows, "\n"); got != strings.Join(want, "\n") {
		t.Fatalf("rows:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	if rec.resolved <= ts6 || len(rec.violations) > 0 {
		t.Fatalf("resolved %d (last commit %d), violations %v", rec.resolved, ts6, rec.violations)
	}
}

var mvccPut = mvccWrite()

// TestDUR13DeferredDurability (DUR-13): a txn told to defer durability
// returns from Commit with its records applied but not yet on disk;
// WaitDurable makes them durable, and one fsync covers every commit
// applied before it (two deferred commits, one fsync).
func TestDUR13DeferredDurability(t *testing.T) {
	c := openDir(t, t.TempDir(), fakeupstream.Config{Seed: 1, Maintain: fakeupstream.MaintainConfig{Off: true}})
	defer c.Close()
	k1, k2 := []byte("k1"), []byte("k2")
	if _, err := c.Put(k1, []byte("v0")); err != nil {
		t.Fatal(err)
	}
	syncs := c.LogSyncs()
	a, b := c.Begin(), c.Begin()
	a.Set(k1, []byte("a"))
	b.Set(k2, []byte("b"))
	a.DeferDurability()
	b.DeferDurability()
	if _, err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if !c.LogPending() || c.LogSyncs() != syncs {
		t.Fatalf("deferred commits synced: pending %v, fsyncs %d -> %d", c.LogPending(), syncs, c.LogSyncs())
	}
	if err := a.WaitDurable(); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitDurable(); err != nil {
		t.Fatal(err)
	}
	if c.LogPending() {
		t.Fatal("records pending after WaitDurable")
	}
	if n := c.LogSyncs() - syncs; n != 1 {
		t.Fatalf("two deferred commits took %d fsyncs, want 1", n)
	}
	// Without deferral a commit returns durable.
	d := c.Begin()
	d.Set(k1, []byte("d"))
	if _, err := d.Commit(); err != nil {
		t.Fatal(err)
	}
	if c.LogPending() {
		t.Fatal("a plain commit returned before its records were on disk")
	}
}

// TestDUR15DeferredReads (DUR-15): a txn with deferred durability reads what
// another deferred commit applied without an fsync, and its WaitDurable
// covers what it read; a plain txn's read still returns only once what
// it read is on disk (DUR-3).
func TestDUR15DeferredReads(t *testing.T) {
	c := openDir(t, t.TempDir(), fakeupstream.Config{Seed: 1, Maintain: fakeupstream.MaintainConfig{Off: true}})
	defer c.Close()
	k := []byte("k")
	// deferredPut commits k=v with deferred durability (applied, maybe
	// not on disk).
	deferredPut := func(v string) *fakeupstream.Txn {
		w := c.Begin()
		w.Set(k, []byte(v))
		w.DeferDurability()
		if _, err := w.Commit(); err != nil {
			t.Fatal(err)
		}
		return w
	}
	w := deferredPut("v1")
	syncs := c.LogSyncs()
	r := c.Begin()
	r.DeferDurability()
	v, err := r.Get(k)
	if err != nil || string(v) != "v1" {
		t.Fatalf("deferred read: %q, %v", v, err)
	}
	if kvs, err := r.Scan(k, nil, 0); err != nil || len(kvs) != 1 {
		t.Fatalf("deferred scan: %v, %v", kvs, err)
	}
	if !c.LogPending() || c.LogSyncs() != syncs {
		t.Fatalf("a deferred read synced: pending %v, fsyncs %d -> %d", c.LogPending(), syncs, c.LogSyncs())
	}
	if err := r.WaitDurable(); err != nil {
		t.Fatal(err)
	}
	if c.LogPending() {
		t.Fatal("WaitDurable of a reader returned before what it read was on disk")
	}
	if err := w.WaitDurable(); err != nil {
		t.Fatal(err)
	}
	w2 := deferredPut("v2")
	plain := c.Begin()
	if v, err := plain.Get(k); err != nil || string(v) != "v2" {
		t.Fatalf("plain read: %q, %v", v, err)
	}
	if c.LogPending() {
		t.Fatal("a plain read returned before what it read was on disk")
	}
	_ = w2.WaitDurable()
}
