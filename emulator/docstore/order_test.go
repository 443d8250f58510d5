package docstore

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
)

// orderSeed is the seed of TestE94_AscendAgainstModel:
// SFEMU_DOCSTORE_SEED replays one.
func orderSeed(t *testing.T) uint64 {
	if v := os.Getenv("SFEMU_DOCSTORE_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SFEMU_DOCSTORE_SEED: %v", err)
		}
		return s
	}
	return rand.Uint64()
}

// TestE94_AscendAgainstModel (specs/emulator-contract.md E94): under
// random batches of upserts and deletes, direct puts and removes and
// tombstone collection, every ordered read (Ascend from a random key,
// stopped after a random count, and Keys) returns exactly the live keys
// of a model map after that key, in ascending order.
func TestE94_AscendAgainstModel(t *testing.T) {
	seed := orderSeed(t)
	t.Logf("seed %d (SFEMU_DOCSTORE_SEED=%d replays it)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	s := New()
	model := map[string]bool{} // key -> live (tombstones are false)
	version := uint64(1)
	key := func() string { return fmt.Sprintf("k%04d", rng.IntN(3000)) }
	for step := range 4000 {
		version++
		switch op := rng.IntN(10); {
		case op < 5: // a batch
			b := s.NewBatch(8)
			for range 1 + rng.IntN(40) {
				k := key()
				if rng.IntN(4) == 0 {
					if b.Delete(k, version) {
						model[k] = false
					}
				} else if b.Upsert(k, version, nil, "p") {
					model[k] = true
				}
			}
			s.Commit(b)
		case op == 5:
			k := key()
			s.Put(k, &Entry{Version: version})
			model[k] = true
		case op == 6:
			k := key()
			s.Remove(k)
			delete(model, k)
		case op == 7:
			for _, k := range s.CollectTombstones(version - uint64(rng.IntN(50))) {
				delete(model, k)
			}
		default: // an ordered read
			var live []string
			for k, l := range model {
				if l {
					live = append(live, k)
				}
			}
			slices.Sort(live)
			after := ""
			if rng.IntN(3) > 0 {
				after = key()
			}
			limit := rng.IntN(200)
			var want []string
			for _, k := range live {
				if k > after && len(want) < limit {
					want = append(want, k)
				}
			}
			var got []string
			s.Ascend(after, func(pk string, e *Entry) bool {
				if len(got) == limit {
					return false
				}
				got = append(got, pk)
				return true
			})
			if !slices.Equal(got, want) {
				t.Fatalf("seed %d step %d: Ascend(%q) limit %d = %v, want %v (E94)", seed, step, after, limit, got, want)
			}
			if keys := s.Keys(); !slices.Equal(keys, live) {
				t.Fatalf("seed %d step %d: Keys = %d keys, want %d (E94)", seed, step, len(keys), len(live))
			}
		}
	}
}

// TestE94_PageDoesNotSortEveryKey (E94): once the order is built, a page
// of ten keys out of 100k, with a few keys written between pages as a
// running ingest writes them, allocates a few kilobytes, not a sorted
// copy of every key (1.6 MB of string headers).
func TestE94_PageDoesNotSortEveryKey(t *testing.T) {
	const n = 100_000
	s := New()
	b := s.NewBatch(n)
	for i := range n {
		b.Upsert(fmt.Sprintf("key-%07d", i), 1, nil, "p")
	}
	s.Commit(b)
	page := func(after string) string {
		last, count := "", 0
		s.Ascend(after, func(pk string, _ *Entry) bool {
			last, count = pk, count+1
			return count < 10
		})
		return last
	}
	page("") // builds the order
	var ms runtime.MemStats
	after := "key-0050000"
	for i := range 20 {
		b := s.NewBatch(2)
		b.Upsert(fmt.Sprintf("new-%03d", i), 2, nil, "p")
		s.Commit(b)
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc
		after = page(after)
		runtime.ReadMemStats(&ms)
		if got := ms.TotalAlloc - before; got > 64<<10 {
			t.Fatalf("page %d after %s allocated %d bytes: a page sorts every key (E94)", i, after, got)
		}
	}
}
