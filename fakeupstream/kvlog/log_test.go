package kvlog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"github.com/searchfabric/sfemu/fakeupstream/mvcc"
	"github.com/searchfabric/sfemu/fakeupstream/topology"
)

func sampleRecords() []Record {
	return []Record{
		{Type: TypeWrite, Key: []byte("k1"), Write: mvcc.Write{Kind: mvcc.WritePut, StartTs: 5, CommitTs: 6, Value: []byte("v")}},
		{Type: TypeWrite, Key: []byte("k2"), Write: mvcc.Write{Kind: mvcc.WritePut, StartTs: 5, CommitTs: 6, Value: []byte{}}, Unlock: true},
		{Type: TypeWrite, Key: []byte("k3"), Write: mvcc.Write{Kind: mvcc.WriteDelete, StartTs: 7, CommitTs: 9}},
		{Type: TypeWrite, Key: []byte{}, Write: mvcc.Write{Kind: mvcc.WriteRollback, StartTs: 8, CommitTs: 8}},
		{Type: TypeLock, Key: []byte("p"), Lock: mvcc.Lock{Key: []byte("p"), Primary: []byte("p"), StartTs: 10, TTL: 3000,
			Op: mvcc.OpPut, Value: []byte("lv"), MinCommitTs: 12, UseAsyncCommit: true, Secondaries: [][]byte{[]byte("s1"), {}}}},
		{Type: TypeLock, Key: []byte("q"), Lock: mvcc.Lock{Key: []byte("q"), Primary: []byte("p"), StartTs: 10, Op: mvcc.OpDel}},
		{Type: TypeDelLock, Key: []byte("q"), StartTs: 10},
		{Type: TypeGC, Ts: 1 << 40},
		{Type: TypeTSO, Ts: 1<<62 + 3},
	}
}

func encode(b []byte, r Record) []byte {
	switch r.Type {
	case TypeWrite:
		return AppendWrite(b, r.Key, &r.Write, r.Unlock)
	case TypeLock:
		return AppendLock(b, &r.Lock)
	case TypeDelLock:
		return AppendDelLock(b, r.Key, r.StartTs)
	default:
		return AppendTs(b, r.Type, r.Ts)
	}
}

// DUR-8: every record decodes to what was encoded (nil and empty values
// stay distinct).
func TestRecordRoundTrip(t *testing.T) {
	for i, r := range sampleRecords() {
		b := encode(nil, r)
		got, err := DecodePayload(b[frameHeader:])
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if r.Type == TypeLock && r.Lock.Secondaries != nil {
			// decoded empty secondaries are zero-length slices
			for j := range got.Lock.Secondaries {
				if len(got.Lock.Secondaries[j]) == 0 {
					got.Lock.Secondaries[j] = []byte{}
				}
			}
		}
		if r.Type == TypeWrite && len(r.Key) == 0 {
			got.Key = r.Key
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("record %d:\n got %#v\nwant %#v", i, got, r)
		}
	}
}

func replayAll(t *testing.T, dir string) ([]Record, Stats, *Log) {
	t.Helper()
	var out []Record
	l, st, err := Open(dir, func(_ int64, r Record) error {
		r.Key = append([]byte(nil), r.Key...)
		out = append(out, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, st, l
}

// DUR-2: group commit: concurrent writers each see their own records
// durable when Sync returns, and a reopen replays all of them in append
// order.
func TestGroupCommitConcurrent(t *testing.T) {
	dir := t.TempDir()
	l, _, err := Open(dir, func(int64, Record) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	const writers, per = 8, 50
	var wg sync.WaitGroup
	var order sync.Mutex
	var appended [][]byte
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < per; i++ {
				k := []byte(fmt.Sprintf("w%d-%d", w, i))
				order.Lock() // the cluster's mutex orders appends
				l.AddWrite(k, mvcc.Write{Kind: mvcc.WritePut, StartTs: 1, CommitTs: 2, Value: k}, false)
				appended = append(appended, k)
				lsn := l.Appended()
				order.Unlock()
				if err := l.Sync(lsn); err != nil {
					t.Error(err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	recs, st, l2 := replayAll(t, dir)
	defer l2.Close()
	if len(recs) != writers*per || st.Records != writers*per {
		t.Fatalf("replayed %d records, want %d", len(recs), writers*per)
	}
	for i, r := range recs {
		if !bytes.Equal(r.Key, appended[i]) {
			t.Fatalf("record %d is %q, want %q", i, r.Key, appended[i])
		}
	}
}

// DUR-5: one log per directory.
func TestSecondOpenIsRefused(t *testing.T) {
	dir := t.TempDir()
	l, _, err := Open(dir, func(int64, Record) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(dir, func(int64, Record) error { return nil }); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v", err)
	}
	l.Close()
	if err := l.Sync(1 << 40); !errors.Is(err, ErrClosed) {
		t.Fatalf("sync after close: %v", err)
	}
}

// DUR-4: an apply error and a record that checksums but does not decode
// are errors naming the file and offset; a torn header is repaired.
func TestReplayErrorsNameFileAndOffset(t *testing.T) {
	dir := t.TempDir()
	l, _, _ := Open(dir, func(int64, Record) error { return nil })
	l.GC(7)
	l.SaveTSO(9)
	l.Close()
	_, _, err := Open(dir, func(off int64, r Record) error {
		if r.Type == TypeTSO {
			return errors.New("boom")
		}
		return nil
	})
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Off <= int64(len(Magic)) || ce.File != filepath.Join(dir, FileName) {
		t.Fatalf("err = %v", err)
	}
	// A framed record with a valid checksum but an unknown type, followed
	// by a good one.
	path := filepath.Join(dir, FileName)
	b, _ := os.ReadFile(path)
	bad, at := beginFrame(nil)
	bad = endFrame(append(bad, 99, 1, 2), at)
	b = append(b, bad...)
	b = AppendTs(b, TypeGC, 10)
	os.WriteFile(path, b, 0o644)
	_, _, err = Open(dir, func(int64, Record) error { return nil })
	if !errors.As(err, &ce) || !bytes.Contains([]byte(err.Error()), []byte("unknown record type 99")) {
		t.Fatalf("err = %v", err)
	}
	// A header torn before its first sync is rewritten.
	dir2 := t.TempDir()
	os.WriteFile(filepath.Join(dir2, FileName), []byte(Magic[:3]), 0o644)
	_, _, l3 := replayAll(t, dir2)
	l3.Close()
}

func writeFile(dir string, b []byte) error {
	return os.WriteFile(filepath.Join(dir, FileName), b, 0o644)
}

// Rule DUR-8: the regions record round-trips (empty keys stay -inf/+inf).
func TestDUR8RegionsRecordRoundTrip(t *testing.T) {
	regions := []topology.Region{
		{ID: 7, EndKey: []byte("m"), ConfVer: 2, Version: 5, Leader: 1, Peers: []topology.Peer{{ID: 8, StoreID: 1}, {ID: 9, StoreID: 2}}},
		{ID: 3, StartKey: []byte("m"), ConfVer: 1, Version: 4, Leader: 0, Peers: []topology.Peer{{ID: 4, StoreID: 3}}},
	}
	b := AppendRegions(nil, 42, regions)
	rec, err := DecodePayload(b[frameHeader:])
	if err != nil {
		t.Fatal(err)
	}
	if rec.Type != TypeRegions || rec.Ts != 42 || len(rec.Regions) != 2 {
		t.Fatalf("decoded %+v", rec)
	}
	for i, r := range rec.Regions {
		w := regions[i]
		if r.ID != w.ID || string(r.StartKey) != string(w.StartKey) || string(r.EndKey) != string(w.EndKey) ||
			r.ConfVer != w.ConfVer || r.Version != w.Version || r.Leader != w.Leader || len(r.Peers) != len(w.Peers) {
			t.Fatalf("region %d: %+v, want %+v", i, r, w)
		}
	}
	if _, err := DecodePayload(b[frameHeader : len(b)-1]); err == nil {
		t.Fatal("a truncated regions record decoded")
	}
}

// TestDUR14WriteBehind (DUR-14): past writeBehindBytes of appended records
// nobody synced, an append writes them to the file without an fsync, so a
// large transaction's records are not all held in memory; they are not
// durable until a Sync (Pending stays true), and a Sync then writes only
// the rest. The replay finds every record in order.
func TestDUR14WriteBehind(t *testing.T) {
	dir := t.TempDir()
	l, _, err := Open(dir, func(int64, Record) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	value := bytes.Repeat([]byte("v"), 1000)
	n := 0
	for l.Size() < 3*writeBehindBytes {
		l.PutLock(&mvcc.Lock{Key: []byte(fmt.Sprintf("k%06d", n)), Primary: []byte("k000000"), StartTs: 5, Op: mvcc.OpPut, Value: value})
		n++
		l.mu.Lock()
		held := len(l.buf)
		l.mu.Unlock()
		if held > writeBehindBytes+2000 {
			t.Fatalf("%d bytes buffered after %d records, want at most %d", held, n, writeBehindBytes)
		}
	}
	fi, err := os.Stat(l.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() < 2*writeBehindBytes {
		t.Fatalf("file holds %d bytes of %d appended: nothing written behind", fi.Size(), l.Size())
	}
	if !l.Pending() || l.Syncs() != 0 {
		t.Fatalf("records written behind count as durable: pending %v, fsyncs %d", l.Pending(), l.Syncs())
	}
	if err := l.Sync(l.Appended()); err != nil {
		t.Fatal(err)
	}
	if l.Pending() || l.Syncs() != 1 {
		t.Fatalf("after Sync: pending %v, fsyncs %d", l.Pending(), l.Syncs())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	recs, st, l2 := replayAll(t, dir)
	defer l2.Close()
	if len(recs) != n || st.TornBytes != 0 {
		t.Fatalf("replayed %d records (torn %d bytes), want %d", len(recs), st.TornBytes, n)
	}
	for i, r := range recs {
		if want := fmt.Sprintf("k%06d", i); string(r.Key) != want {
			t.Fatalf("record %d is %q, want %q", i, r.Key, want)
		}
	}
}
