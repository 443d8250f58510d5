package mvcc

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"testing"

	"github.com/searchfabric/sfemu/fakeupstream/tso"
)

var seedFlag = flag.Int64("seed", 1, "seed for randomized mvcc tests")

func k(s string) []byte { return []byte(s) }

func put(key, val string) Mutation { return Mutation{Op: OpPut, Key: k(key), Value: k(val)} }

func mustGet(t *testing.T, s *Store, key string, ts uint64) []byte {
	t.Helper()
	v, err := s.Get(k(key), ts)
	if err != nil {
		t.Fatalf("get %s@%d: %v", key, ts, err)
	}
	return v
}

func commit2PC(t *testing.T, s *Store, startTs, commitTs uint64, muts ...Mutation) {
	t.Helper()
	if err := s.Prewrite(muts, PrewriteOptions{Primary: muts[0].Key, StartTs: startTs, TTL: 3000}); err != nil {
		t.Fatal(err)
	}
	keys := make([][]byte, len(muts))
	for i, m := range muts {
		keys[i] = m.Key
	}
	if err := s.Commit(keys, startTs, commitTs); err != nil {
		t.Fatal(err)
	}
}

// Rule MVCC-1: a read at ts sees exactly the newest commit with
// commit_ts <= ts (snapshot isolation), deletes hide the key.
func TestSnapshotIsolation(t *testing.T) {
	s := New(nil)
	commit2PC(t, s, 10, 20, put("a", "1"))
	commit2PC(t, s, 30, 40, put("a", "2"), put("b", "x"))
	commit2PC(t, s, 50, 60, Mutation{Op: OpDel, Key: k("a")})
	for _, c := range []struct {
		ts   uint64
		want string
	}{{19, ""}, {20, "1"}, {39, "1"}, {40, "2"}, {59, "2"}, {60, ""}, {100, ""}} {
		if got := mustGet(t, s, "a", c.ts); string(got) != c.want {
			t.Errorf("a@%d = %q, want %q", c.ts, got, c.want)
		}
	}
	kvs, err := s.Scan(nil, nil, 45, 0)
	if err != nil || len(kvs) != 2 || string(kvs[0].Value) != "2" || string(kvs[1].Key) != "b" {
		t.Fatalf("scan@45: %v %v", kvs, err)
	}
	kvs, _ = s.Scan(nil, nil, 100, 0)
	if len(kvs) != 1 || string(kvs[0].Key) != "b" {
		t.Fatalf("scan@100: %v", kvs)
	}
	kvs, _ = s.Scan(k("a"), k("b"), 45, 0)
	if len(kvs) != 1 {
		t.Fatalf("scan [a,b): %v", kvs)
	}
	kvs, _ = s.Scan(nil, nil, 45, 1)
	if len(kvs) != 1 {
		t.Fatalf("limit: %v", kvs)
	}
}

// Rule MVCC-2: a data lock with start_ts <= read ts blocks with a typed
// error naming the lock; locks above the read ts, lock-only locks and
// async locks whose min_commit_ts > read ts do not block.
func TestLockBlocking(t *testing.T) {
	s := New(nil)
	commit2PC(t, s, 10, 20, put("a", "1"))
	if err := s.Prewrite([]Mutation{put("a", "2")}, PrewriteOptions{Primary: k("a"), StartTs: 30, TTL: 100}); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, s, "a", 29); string(got) != "1" {
		t.Fatalf("read below lock: %q", got)
	}
	_, err := s.Get(k("a"), 30)
	var le *LockedError
	if !errors.As(err, &le) || !errors.Is(err, ErrLocked) || le.Lock.StartTs != 30 || !bytes.Equal(le.Lock.Primary, k("a")) {
		t.Fatalf("want LockedError, got %v", err)
	}
	if _, err := s.Scan(nil, nil, 35, 0); !errors.Is(err, ErrLocked) {
		t.Fatalf("scan over lock: %v", err)
	}
	s.Prewrite([]Mutation{{Op: OpLock, Key: k("l")}}, PrewriteOptions{Primary: k("l"), StartTs: 31})
	if _, err := s.Get(k("l"), 40); err != nil {
		t.Fatalf("lock-only lock blocked: %v", err)
	}
	s.Prewrite([]Mutation{put("m", "v")}, PrewriteOptions{Primary: k("m"), StartTs: 32, AsyncCommit: true, MinCommitTs: 50})
	if _, err := s.Get(k("m"), 45); err != nil {
		t.Fatalf("async lock with min_commit_ts above read ts blocked: %v", err)
	}
	if _, err := s.Get(k("m"), 50); !errors.Is(err, ErrLocked) {
		t.Fatalf("async lock at min_commit_ts must block: %v", err)
	}
}

// Rule MVCC-3: rolled-back data is never visible; a late prewrite or
// commit of a rolled-back txn fails; rollback of a committed txn fails.
func TestRollbackInvisible(t *testing.T) {
	s := New(nil)
	s.Prewrite([]Mutation{put("a", "x")}, PrewriteOptions{Primary: k("a"), StartTs: 10})
	if err := s.Rollback([][]byte{k("a")}, 10); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, s, "a", 100); got != nil {
		t.Fatalf("rolled back value visible: %q", got)
	}
	var rb *TxnRolledBackError
	if err := s.Commit([][]byte{k("a")}, 10, 20); !errors.As(err, &rb) {
		t.Fatalf("commit after rollback: %v", err)
	}
	if err := s.Prewrite([]Mutation{put("a", "y")}, PrewriteOptions{Primary: k("a"), StartTs: 10}); !errors.As(err, &rb) {
		t.Fatalf("late prewrite after rollback: %v", err)
	}
	commit2PC(t, s, 30, 40, put("b", "1"))
	var ce *TxnCommittedError
	if err := s.Rollback([][]byte{k("b")}, 30); !errors.As(err, &ce) || ce.CommitTs != 40 {
		t.Fatalf("rollback of committed: %v", err)
	}
	// Commit is idempotent.
	if err := s.Commit([][]byte{k("b")}, 30, 40); err != nil {
		t.Fatalf("re-commit: %v", err)
	}
	var nf *LockNotFoundError
	if err := s.Commit([][]byte{k("zz")}, 77, 78); !errors.As(err, &nf) {
		t.Fatalf("commit without lock: %v", err)
	}
}

// Rule MVCC-4: prewrite conflicts: another txn's lock, or a commit newer
// than our start ts; the failing call applies nothing.
func TestPrewriteConflicts(t *testing.T) {
	s := New(nil)
	commit2PC(t, s, 10, 20, put("a", "1"))
	var wc *WriteConflictError
	err := s.Prewrite([]Mutation{put("b", "new"), put("a", "2")}, PrewriteOptions{Primary: k("b"), StartTs: 15})
	if !errors.As(err, &wc) || wc.ConflictCommitTs != 20 {
		t.Fatalf("want write conflict, got %v", err)
	}
	if _, ok := s.LockOf(k("b")); ok {
		t.Fatal("failed prewrite left a lock behind")
	}
	s.Prewrite([]Mutation{put("a", "2")}, PrewriteOptions{Primary: k("a"), StartTs: 25})
	if err := s.Prewrite([]Mutation{put("a", "3")}, PrewriteOptions{Primary: k("a"), StartTs: 26}); !errors.Is(err, ErrLocked) {
		t.Fatalf("want locked, got %v", err)
	}
	if err := s.Prewrite([]Mutation{put("a", "2")}, PrewriteOptions{Primary: k("a"), StartTs: 25}); err != nil {
		t.Fatalf("idempotent re-prewrite: %v", err)
	}
	if s.NumLocks() != 1 {
		t.Fatalf("locks %d", s.NumLocks())
	}
	if err := s.OnePC([]Mutation{put("a", "9")}, 27, 28); !errors.Is(err, ErrLocked) {
		t.Fatalf("1PC over lock: %v", err)
	}
	if err := s.Commit([][]byte{k("a")}, 25, 25); err == nil {
		t.Fatal("commit_ts == start_ts must fail")
	}
}

// Rule MVCC-5: CheckTxnStatus rolls back an expired primary, reports a live
// one, reports committed txns, and protects a missing txn with a rollback.
func TestCheckTxnStatusAndResolve(t *testing.T) {
	s := New(nil)
	ts := func(ms int64) uint64 { return tso.Compose(ms, 0) }
	s.Prewrite([]Mutation{put("p", "1"), put("s", "2")}, PrewriteOptions{Primary: k("p"), StartTs: ts(1000), TTL: 500})
	st := s.CheckTxnStatus(k("p"), ts(1000), ts(1400))
	if st.Lock == nil || st.RolledBack {
		t.Fatalf("live lock: %+v", st)
	}
	st = s.CheckTxnStatus(k("p"), ts(1000), ts(1500))
	if !st.RolledBack {
		t.Fatalf("expired lock must roll back: %+v", st)
	}
	// The secondary still carries the lock; the resolver rolls it back.
	n, err := s.ResolveLock(nil, nil, ts(1000), 0)
	if err != nil || n != 1 || s.NumLocks() != 0 {
		t.Fatalf("resolve rollback: n=%d err=%v locks=%d", n, err, s.NumLocks())
	}
	if mustGet(t, s, "s", ts(2000)) != nil {
		t.Fatal("resolved-rolled-back secondary visible")
	}
	// Committed primary, lingering secondary: resolve commits it.
	s.Prewrite([]Mutation{put("p", "A"), put("s", "B")}, PrewriteOptions{Primary: k("p"), StartTs: ts(3000), TTL: 10})
	s.Commit([][]byte{k("p")}, ts(3000), ts(3001))
	st = s.CheckTxnStatus(k("p"), ts(3000), ts(9000))
	if st.CommitTs != ts(3001) {
		t.Fatalf("committed status %+v", st)
	}
	if n, _ := s.ResolveLock(nil, nil, ts(3000), st.CommitTs); n != 1 {
		t.Fatalf("resolve commit n=%d", n)
	}
	if got := mustGet(t, s, "s", ts(3001)); string(got) != "B" {
		t.Fatalf("s@commit = %q", got)
	}
	// Unknown txn: rollback record written, later prewrite fails.
	st = s.CheckTxnStatus(k("q"), ts(4000), ts(4001))
	if !st.RolledBack {
		t.Fatalf("missing txn: %+v", st)
	}
	if err := s.Prewrite([]Mutation{put("q", "late")}, PrewriteOptions{Primary: k("q"), StartTs: ts(4000)}); err == nil {
		t.Fatal("late prewrite after protective rollback must fail")
	}
}

// Rule MVCC-6: async commit: all secondaries locked → committed at the max
// min_commit_ts; one missing → rolled back.
func TestAsyncCommitResolution(t *testing.T) {
	s := New(nil)
	opts := PrewriteOptions{Primary: k("p"), StartTs: 10, TTL: 1, AsyncCommit: true, Secondaries: [][]byte{k("s1"), k("s2")}}
	opts.MinCommitTs = 12
	s.Prewrite([]Mutation{put("p", "1")}, opts)
	opts.MinCommitTs = 15
	s.Prewrite([]Mutation{put("s1", "2"), put("s2", "3")}, opts)
	st := s.CheckTxnStatus(k("p"), 10, tso.Compose(1<<20, 0))
	if st.Lock == nil || !st.Lock.UseAsyncCommit || len(st.Lock.Secondaries) != 2 {
		t.Fatalf("async primary must be reported, not rolled back: %+v", st)
	}
	sec := s.CheckSecondaryLocks(st.Lock.Secondaries, 10)
	if sec.RolledBack || sec.CommitTs != 0 || len(sec.Locks) != 2 {
		t.Fatalf("secondaries %+v", sec)
	}
	commitTs := st.Lock.MinCommitTs
	for _, l := range sec.Locks {
		commitTs = max(commitTs, l.MinCommitTs)
	}
	if err := s.Commit([][]byte{k("p")}, 10, 11); err == nil {
		t.Fatal("commit below a lock's min_commit_ts must fail")
	}
	if _, err := s.ResolveLock(nil, nil, 10, commitTs); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, s, "s2", 15); string(got) != "3" {
		t.Fatalf("s2@15 = %q", got)
	}
	// Missing secondary → rollback.
	s.Prewrite([]Mutation{put("p2", "1")}, PrewriteOptions{Primary: k("p2"), StartTs: 20, AsyncCommit: true, Secondaries: [][]byte{k("t1")}, MinCommitTs: 21})
	sec = s.CheckSecondaryLocks([][]byte{k("t1")}, 20)
	if !sec.RolledBack {
		t.Fatalf("missing secondary must roll back: %+v", sec)
	}
}

// Rule MVCC-7: GC: reads below the safe point fail with a typed error; data
// visible at the safe point stays readable; old versions are dropped.
func TestGC(t *testing.T) {
	s := New(nil)
	commit2PC(t, s, 10, 20, put("a", "1"))
	commit2PC(t, s, 30, 40, put("a", "2"))
	commit2PC(t, s, 50, 60, Mutation{Op: OpDel, Key: k("b")})
	commit2PC(t, s, 70, 80, put("a", "3"))
	s.GC(50)
	if _, err := s.Get(k("a"), 49); !errors.Is(err, ErrGCTooEarly) {
		t.Fatalf("read below safe point: %v", err)
	}
	if _, err := s.Scan(nil, nil, 10, 0); !errors.Is(err, ErrGCTooEarly) {
		t.Fatalf("scan below safe point: %v", err)
	}
	if got := mustGet(t, s, "a", 50); string(got) != "2" {
		t.Fatalf("a@50 = %q", got)
	}
	if got := mustGet(t, s, "a", 80); string(got) != "3" {
		t.Fatalf("a@80 = %q", got)
	}
	if e := s.get(k("a")); len(e.writes) != 2 {
		t.Fatalf("GC kept %d versions of a, want 2", len(e.writes))
	}
	s.GC(10) // never lowers
	if s.GCSafePoint() != 50 {
		t.Fatal("safe point lowered")
	}
}

// Rule MVCC-8: the observer sees prewrite/commit/rollback/committed with
// old values, and nothing for lock-only mutations.
func TestObserverChanges(t *testing.T) {
	var log []string
	s := New(func(c Change) {
		log = append(log, fmt.Sprintf("%s %s %s s=%d c=%d v=%s old=%s", c.Kind, c.Op, c.Key, c.StartTs, c.CommitTs, c.Value, c.OldValue))
	})
	s.OnePC([]Mutation{put("a", "1")}, 1, 2)
	s.Prewrite([]Mutation{put("a", "2"), {Op: OpLock, Key: k("z")}}, PrewriteOptions{Primary: k("a"), StartTs: 3})
	s.Commit([][]byte{k("a"), k("z")}, 3, 4)
	s.Prewrite([]Mutation{{Op: OpDel, Key: k("a")}}, PrewriteOptions{Primary: k("a"), StartTs: 5})
	s.Rollback([][]byte{k("a")}, 5)
	want := []string{
		"committed put a s=1 c=2 v=1 old=",
		"prewrite put a s=3 c=0 v=2 old=1",
		"commit put a s=3 c=4 v= old=",
		"prewrite del a s=5 c=0 v= old=2",
		"rollback del a s=5 c=0 v= old=",
	}
	if fmt.Sprint(log) != fmt.Sprint(want) {
		t.Fatalf("changes:\n%v\nwant\n%v", log, want)
	}
}

func TestScanVersionsOldValues(t *testing.T) {
	s := New(nil)
	commit2PC(t, s, 1, 2, put("a", "1"))
	commit2PC(t, s, 3, 4, put("a", "2"))
	commit2PC(t, s, 5, 6, Mutation{Op: OpDel, Key: k("a")})
	commit2PC(t, s, 7, 8, put("a", "3"), put("b", "b"))
	vs := s.ScanVersions(nil, nil, 2, 100)
	var got []string
	for _, v := range vs {
		got = append(got, fmt.Sprintf("%s %s %d %s/%s", v.Key, v.Op, v.CommitTs, v.Value, v.OldValue))
	}
	want := []string{"a put 4 2/1", "a del 6 /2", "a put 8 3/", "b put 8 b/"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("versions %v want %v", got, want)
	}
	if lk, ok := s.MinLockTs(nil, nil); ok {
		t.Fatalf("no locks expected, got %d", lk)
	}
}

// Rule MVCC-1 (randomized): random committed 1PC/2PC transactions agree
// with a simple history model at every ts.
func TestRandomAgainstModel(t *testing.T) {
	seed := *seedFlag
	rng := rand.New(rand.NewSource(seed))
	s := New(nil)
	type ver struct {
		ts  uint64
		val string // "" = deleted
	}
	model := map[string][]ver{}
	ts := uint64(1)
	for i := 0; i < 500; i++ {
		n := 1 + rng.Intn(3)
		var muts []Mutation
		seen := map[string]bool{}
		for j := 0; j < n; j++ {
			key := fmt.Sprintf("k%02d", rng.Intn(20))
			if seen[key] {
				continue
			}
			seen[key] = true
			if rng.Intn(4) == 0 {
				muts = append(muts, Mutation{Op: OpDel, Key: k(key)})
			} else {
				muts = append(muts, put(key, fmt.Sprintf("v%d", i)))
			}
		}
		start, commit := ts, ts+1+uint64(rng.Intn(3))
		ts = commit + 1
		var err error
		if rng.Intn(2) == 0 {
			err = s.OnePC(muts, start, commit)
		} else {
			err = s.Prewrite(muts, PrewriteOptions{Primary: muts[0].Key, StartTs: start})
			if err == nil {
				keys := [][]byte{}
				for _, m := range muts {
					keys = append(keys, m.Key)
				}
				err = s.Commit(keys, start, commit)
			}
		}
		if err != nil {
			t.Fatalf("seed %d txn %d: %v", seed, i, err)
		}
		for _, m := range muts {
			v := ""
			if m.Op == OpPut {
				v = string(m.Value)
			}
			model[string(m.Key)] = append(model[string(m.Key)], ver{commit, v})
		}
	}
	for probe := uint64(0); probe <= ts; probe += 7 {
		for key, vs := range model {
			want := ""
			for _, v := range vs {
				if v.ts <= probe {
					want = v.val
				}
			}
			if got := mustGet(t, s, key, probe); string(got) != want {
				t.Fatalf("seed %d: %s@%d = %q, want %q", seed, key, probe, got, want)
			}
		}
	}
}

func BenchmarkOnePCSingleRow(b *testing.B) {
	s := New(func(Change) {})
	key := make([]byte, 19)
	key[0] = 't'
	val := bytes.Repeat([]byte("v"), 64)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		key[11], key[12], key[13], key[14] = byte(i>>24), byte(i>>16), byte(i>>8), byte(i)
		ts := uint64(i)*2 + 1
		if err := s.OnePC([]Mutation{{Op: OpPut, Key: key, Value: val}}, ts, ts+1); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

func scanStore(n int) *Store {
	s := New(nil)
	v := make([]byte, 100)
	for i := 0; i < n; i++ {
		k := []byte(fmt.Sprintf("t_r%08d", i))
		if err := s.OnePC([]Mutation{{Op: OpPut, Key: k, Value: v}}, uint64(2*i+1), uint64(2*i+2)); err != nil {
			panic(err)
		}
	}
	return s
}

// The 200k-row single-region incremental scan: ScanVersions sizes its
// result once ("presized"); "grow" is the former append-as-you-go
// behaviour (AppendVersions into nil), kept as the baseline.
func BenchmarkScanVersions200k(b *testing.B) {
	s := scanStore(200_000)
	b.Run("presized", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if n := len(s.ScanVersions(nil, nil, 0, ^uint64(0))); n != 200_000 {
				b.Fatal(n)
			}
		}
	})
	b.Run("grow", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if n := len(s.AppendVersions(nil, nil, nil, 0, ^uint64(0))); n != 200_000 {
				b.Fatal(n)
			}
		}
	})
	b.Run("reused", func(b *testing.B) {
		b.ReportAllocs()
		var buf []Version
		for i := 0; i < b.N; i++ {
			buf = s.AppendVersions(buf[:0], nil, nil, 0, ^uint64(0))
		}
	})
}

// MVCC-9: ScanVersions allocates its result at its exact size, and
// AppendVersions fills a caller's buffer in place.
func TestScanVersionsPresized(t *testing.T) {
	s := scanStore(1000)
	out := s.ScanVersions(nil, nil, 0, ^uint64(0))
	if len(out) != 1000 || cap(out) != len(out) {
		t.Fatalf("len %d cap %d, want both 1000", len(out), cap(out))
	}
	buf := make([]Version, 0, 1000)
	got := s.AppendVersions(buf, nil, nil, 0, ^uint64(0))
	if &got[0] != &buf[:1][0] {
		t.Fatal("AppendVersions reallocated a buffer that had room")
	}
	if n := s.CountVersions([]byte("t_r00000100"), []byte("t_r00000200"), 0, ^uint64(0)); n != 100 {
		t.Fatalf("count %d, want 100", n)
	}
	if s.ScanVersions(nil, nil, ^uint64(0)-1, ^uint64(0)) != nil {
		t.Fatal("empty scan should be nil")
	}
}

// TestMVCC11HandoffKeepsTheCallersBytes (MVCC-11): a prewrite with Handoff
// keeps the mutations' keys and values without a copy (a large
// transaction's buffer becomes the store's data); without it the store
// copies them. Reads and the commit are the same either way.
func TestMVCC11HandoffKeepsTheCallersBytes(t *testing.T) {
	for _, handoff := range []bool{false, true} {
		s := New(nil)
		k, v := []byte("key"), []byte("value")
		muts := []Mutation{{Op: OpPut, Key: k, Value: v}, {Op: OpDel, Key: []byte("gone")}}
		if err := s.Prewrite(muts, PrewriteOptions{Primary: k, StartTs: 10, TTL: 100, Handoff: handoff}); err != nil {
			t.Fatal(err)
		}
		l, ok := s.LockOf(k)
		if !ok {
			t.Fatal("no lock")
		}
		shared := &l.Value[0] == &v[0]
		if shared != handoff {
			t.Fatalf("handoff %v: the lock's value shares the caller's bytes: %v", handoff, shared)
		}
		if keyShared := &s.get(k).key[0] == &k[0]; keyShared != handoff {
			t.Fatalf("handoff %v: the entry's key shares the caller's bytes: %v", handoff, keyShared)
		}
		if err := s.Commit([][]byte{k, []byte("gone")}, 10, 11); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(k, 12)
		if err != nil || string(got) != "value" {
			t.Fatalf("handoff %v: read %q, %v", handoff, got, err)
		}
	}
}
