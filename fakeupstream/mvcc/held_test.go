package mvcc

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"unsafe"
)

// TestMVCC12LocksShareTheRequestHeader (MVCC-12): the locks of one
// prewrite request share one header and cost 32 bytes each beside it;
// the public Lock a reader gets is the same as before (the primary's
// lock alone lists the secondaries), for Prewrite and PrewriteChunks.
func TestMVCC12LocksShareTheRequestHeader(t *testing.T) {
	if sz := unsafe.Sizeof(keyLock{}); sz != 32 {
		t.Fatalf("a key's lock is %d bytes, want 32 (the header is shared)", sz)
	}
	if sz := unsafe.Sizeof(entry{}); sz > 64 {
		t.Fatalf("an entry is %d bytes: the lock's op no longer fits its padding", sz)
	}
	opts := PrewriteOptions{Primary: k("a"), StartTs: 10, TTL: 3000, AsyncCommit: true,
		Secondaries: [][]byte{k("b"), k("c")}, MinCommitTs: 12}
	for _, chunked := range []bool{false, true} {
		s := New(nil)
		muts := []Mutation{put("a", "1"), {Op: OpDel, Key: k("b")}, {Op: OpLock, Key: k("c")}}
		if chunked {
			if _, err := s.PrewriteChunks([][]Mutation{muts[:1], muts[1:]}, opts); err != nil {
				t.Fatal(err)
			}
		} else if err := s.Prewrite(muts, opts); err != nil {
			t.Fatal(err)
		}
		h := s.get(k("a")).lock.hdr
		for _, key := range []string{"b", "c"} {
			if s.get(k(key)).lock.hdr != h {
				t.Fatalf("chunked %v: the lock of %s has a header of its own", chunked, key)
			}
		}
		want := []Lock{
			{Key: k("a"), Primary: k("a"), StartTs: 10, TTL: 3000, Op: OpPut, Value: k("1"), MinCommitTs: 12,
				UseAsyncCommit: true, Secondaries: [][]byte{k("b"), k("c")}},
			{Key: k("b"), Primary: k("a"), StartTs: 10, TTL: 3000, Op: OpDel, MinCommitTs: 12, UseAsyncCommit: true},
			{Key: k("c"), Primary: k("a"), StartTs: 10, TTL: 3000, Op: OpLock, MinCommitTs: 12, UseAsyncCommit: true},
		}
		if got := s.ScanLocks(nil, nil, 100, 0); !reflect.DeepEqual(got, want) {
			t.Fatalf("chunked %v: locks\n%+v\nwant\n%+v", chunked, got, want)
		}
	}
}

// TestMVCC12RestoredLocksShareHeaders (MVCC-12): a reopened store replays
// a request's locks (logged one after the other) into one header, so a
// large transaction left locked costs as little after a restart; a lock
// with other fields gets its own.
func TestMVCC12RestoredLocksShareHeaders(t *testing.T) {
	s := New(nil)
	for i := 0; i < 100; i++ {
		l := Lock{Key: k(fmt.Sprintf("k%03d", i)), Primary: k("k000"), StartTs: 7, TTL: 50, Op: OpPut, Value: k("v")}
		if err := s.RestoreLock(l); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RestoreLock(Lock{Key: k("z"), Primary: k("z"), StartTs: 9, TTL: 50, Op: OpPut}); err != nil {
		t.Fatal(err)
	}
	h := s.get(k("k000")).lock.hdr
	if s.get(k("k099")).lock.hdr != h {
		t.Fatal("restored locks of one txn do not share a header")
	}
	if s.get(k("z")).lock.hdr == h {
		t.Fatal("a lock of another txn shares the header")
	}
	if l, _ := s.LockOf(k("k050")); l.StartTs != 7 || string(l.Primary) != "k000" || l.TTL != 50 {
		t.Fatalf("restored lock %+v", l)
	}
}

// TestMVCC12PrewriteChunksFreesChunksAndCommitsHeld (MVCC-12):
// PrewriteChunks is all or nothing and leaves the caller's chunks intact
// on a conflict; on success every chunk is released and CommitHeld
// commits every key still locked, skipping keys already committed, after
// checking all of them (a rolled-back key fails it before any commit).
func TestMVCC12PrewriteChunksFreesChunksAndCommitsHeld(t *testing.T) {
	s := New(nil)
	commit2PC(t, s, 5, 6, put("x3", "old"))
	mk := func() [][]Mutation {
		var chunks [][]Mutation
		for c := 0; c < 3; c++ {
			chunks = append(chunks, []Mutation{put(fmt.Sprintf("x%d", 2*c), "v"), put(fmt.Sprintf("x%d", 2*c+1), "v")})
		}
		return chunks
	}
	// start ts 4 is below x3's commit at 6: a write conflict, nothing locked.
	chunks := mk()
	_, err := s.PrewriteChunks(chunks, PrewriteOptions{Primary: k("x0"), StartTs: 4, TTL: 100})
	var wc *WriteConflictError
	if !errors.As(err, &wc) || s.NumLocks() != 0 || chunks[2] == nil {
		t.Fatalf("conflict: err %v, %d locks, chunks kept %v", err, s.NumLocks(), chunks[2] != nil)
	}
	chunks = mk()
	held, err := s.PrewriteChunks(chunks, PrewriteOptions{Primary: k("x0"), StartTs: 10, TTL: 100})
	if err != nil {
		t.Fatal(err)
	}
	for i, ch := range chunks {
		if ch != nil {
			t.Fatalf("chunk %d was not released", i)
		}
	}
	if held.Len() != 6 || s.NumLocks() != 6 || string(held.Keys()[5]) != "x5" {
		t.Fatalf("held %d keys (%q), %d locks", held.Len(), held.Keys(), s.NumLocks())
	}
	// A resolver rolls x4 back: the commit fails before committing anything.
	if err := s.Rollback([][]byte{k("x4")}, 10); err != nil {
		t.Fatal(err)
	}
	var rb *TxnRolledBackError
	if err := s.CommitHeld(held, 11); !errors.As(err, &rb) || s.NumLocks() != 5 {
		t.Fatalf("commit over a rolled-back key: %v, %d locks left", err, s.NumLocks())
	}

	held2, err := s.PrewriteChunks([][]Mutation{{put("y0", "a"), put("y1", "b")}}, PrewriteOptions{Primary: k("y0"), StartTs: 20, TTL: 100})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit([][]byte{k("y0")}, 20, 21); err != nil { // the primary first
		t.Fatal(err)
	}
	if err := s.CommitHeld(held2, 21); err != nil {
		t.Fatal(err)
	}
	if v := mustGet(t, s, "y1", 22); string(v) != "b" || s.NumLocks() != 5 {
		t.Fatalf("y1 = %q, %d locks", v, s.NumLocks())
	}
}
