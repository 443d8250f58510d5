package mvcc

import (
	"fmt"
	"math/rand"
	"testing"
)

// checkIndex verifies that the hash index and the ordered tree hold the
// same entries (MVCC-10).
func checkIndex(t *testing.T, s *Store, seed int64, step int) {
	t.Helper()
	if s.tree.Len() != len(s.byKey) {
		t.Fatalf("seed %d step %d: tree holds %d keys, index %d", seed, step, s.tree.Len(), len(s.byKey))
	}
	s.tree.Ascend(func(e *entry) bool {
		if s.byKey[string(e.key)] != e {
			t.Fatalf("seed %d step %d: key %q is in the tree but the index maps it elsewhere", seed, step, e.key)
		}
		return true
	})
}

// TestMVCC10IndexAgreesWithTree: point lookups go through a hash index
// beside the ordered tree; every step that creates a key (prewrite, 1PC,
// rollback record, txn status check) or drops one (GC of a deleted key)
// keeps both in step. rule: MVCC-10
func TestMVCC10IndexAgreesWithTree(t *testing.T) {
	seed := *seedFlag
	rng := rand.New(rand.NewSource(seed))
	s := New(nil)
	ts := uint64(10)
	for step := 0; step < 3000; step++ {
		key := k(fmt.Sprintf("k%03d", rng.Intn(200)))
		ts += 2
		switch rng.Intn(6) {
		case 0, 1:
			if err := s.OnePC([]Mutation{put(string(key), fmt.Sprint(step))}, ts, ts+1); err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
		case 2:
			if err := s.OnePC([]Mutation{{Op: OpDel, Key: key}}, ts, ts+1); err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
		case 3:
			if err := s.Prewrite([]Mutation{put(string(key), "x")}, PrewriteOptions{Primary: key, StartTs: ts}); err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			if rng.Intn(2) == 0 {
				err := s.Commit([][]byte{key}, ts, ts+1)
				if err != nil {
					t.Fatalf("seed %d step %d: %v", seed, step, err)
				}
			} else if err := s.Rollback([][]byte{key}, ts); err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
		case 4:
			// A status check of a txn that never wrote creates the key.
			s.CheckTxnStatus(k(fmt.Sprintf("fresh%d", step)), ts, ts+1)
		case 5:
			s.GC(ts)
		}
		ts++
		checkIndex(t, s, seed, step)
	}
	s.GC(ts + 10)
	checkIndex(t, s, seed, -1)
	for _, e := range s.byKey {
		if v, err := s.Get(e.key, ts+10); err != nil || (v == nil && len(e.writes) > 0 && e.lock == nil && e.writes[len(e.writes)-1].Kind == WritePut) {
			t.Fatalf("seed %d: key %q after GC: %q %v", seed, e.key, v, err)
		}
	}
}

// BenchmarkPointUpdate (MVCC-10): a 2PC update of one existing key
// (conflict check, prewrite, commit) in stores of 10k, 100k and 1M keys:
// the cost does not grow with the store.
func BenchmarkPointUpdate(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			s := New(func(Change) {})
			keys := make([][]byte, n)
			val := make([]byte, 64)
			for i := range keys {
				keys[i] = []byte(fmt.Sprintf("t\x80\x00\x00\x00\x00\x00\x00\x6a_r%08d", i))
				if err := s.OnePC([]Mutation{{Op: OpPut, Key: keys[i], Value: val}}, 1, 2); err != nil {
					b.Fatal(err)
				}
			}
			ts := uint64(10)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				key := keys[(i*7919)%n]
				ts += 2
				if err := s.Prewrite([]Mutation{{Op: OpPut, Key: key, Value: val}}, PrewriteOptions{Primary: key, StartTs: ts}); err != nil {
					b.Fatal(err)
				}
				if err := s.Commit([][]byte{key}, ts, ts+1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
