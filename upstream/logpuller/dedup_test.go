package logpuller

import (
	"flag"
	"fmt"
	"math/rand"
	"testing"
)

var dedupSeed = flag.Int64("dedup-seed", 0, "seed for TestDeliveredSetMatchesModel (0 = time based)")

type dedupKey struct {
	commitTs, startTs uint64
	key               string
}

// The delivered set answers exactly like a plain map of (commit_ts,
// start_ts, key) under adds, re-adds and prunes, across index growth, chunk
// boundaries, keys longer than an arena chunk and shrinking after a burst.
func TestDeliveredSetMatchesModel(t *testing.T) {
	seed := *dedupSeed
	if seed == 0 {
		seed = rand.Int63()
	}
	rng := rand.New(rand.NewSource(seed))
	d := newDeliveredSet()
	model := map[dedupKey]bool{}
	keyOf := func(i int) []byte {
		if rng.Intn(5000) == 0 {
			long := make([]byte, arenaChunkLen+1+rng.Intn(100))
			for j := range long {
				long[j] = byte(i + j)
			}
			return long
		}
		return []byte(fmt.Sprintf("t\x80_r%08d", i))
	}
	var recent []dedupKey
	pruned := uint64(0)
	for round := 0; round < 30; round++ {
		// Bursts from a few rows to several row chunks (a catch-up scan).
		n := 1 + rng.Intn(3*rowChunkLen)
		if round%10 == 9 {
			n = 5 * rowChunkLen
		}
		for i := 0; i < n; i++ {
			var k dedupKey
			if len(recent) > 0 && rng.Intn(4) == 0 {
				k = recent[rng.Intn(len(recent))] // a re-delivery
			} else {
				c := pruned + 1 + uint64(rng.Intn(1000))
				k = dedupKey{commitTs: c, startTs: c - uint64(rng.Intn(3)) - 1, key: string(keyOf(rng.Intn(20000)))}
				if rng.Intn(3) == 0 {
					recent = append(recent, k)
				}
			}
			want := !model[k]
			if got := d.add(k.commitTs, k.startTs, []byte(k.key)); got != want {
				t.Fatalf("seed %d round %d: add(%d, %d, %q) = %v, want %v", seed, round, k.commitTs, k.startTs, k.key, got, want)
			}
			model[k] = true
		}
		if d.size() != len(model) {
			t.Fatalf("seed %d round %d: size %d, model %d", seed, round, d.size(), len(model))
		}
		if rng.Intn(3) > 0 {
			pruned += uint64(rng.Intn(1200))
			if round%10 == 9 {
				pruned += 2000 // everything goes: the index must shrink
			}
			d.prune(pruned)
			for k := range model {
				if k.commitTs <= pruned {
					delete(model, k)
				}
			}
			keep := recent[:0]
			for _, k := range recent {
				if k.commitTs > pruned {
					keep = append(keep, k)
				}
			}
			recent = keep
			if d.size() != len(model) {
				t.Fatalf("seed %d round %d: size %d after prune(%d), model %d", seed, round, d.size(), pruned, len(model))
			}
			if len(d.slots) > slotsShrinkRows*2*max(len(model), 1) && len(d.slots) > slotsKeep {
				t.Fatalf("seed %d round %d: index keeps %d slots for %d rows", seed, round, len(d.slots), len(model))
			}
		}
		// Every row of the model is still known.
		for k := range model {
			if d.add(k.commitTs, k.startTs, []byte(k.key)) {
				t.Fatalf("seed %d round %d: (%d, %d, %q) forgotten", seed, round, k.commitTs, k.startTs, k.key)
			}
		}
	}
}

// BenchmarkDeliveredSetGrow: adding a 200k-row catch-up that is pruned
// only at its end (one op = one row).
func BenchmarkDeliveredSetGrow(b *testing.B) {
	const backlog = 200000
	keys := make([][]byte, backlog)
	for i := range keys {
		keys[i] = rawKey(1, int64(i))
	}
	d := newDeliveredSet()
	b.ReportAllocs()
	b.ResetTimer()
	ts := uint64(100)
	for i := 0; i < b.N; i++ {
		j := i % backlog
		if j == 0 && i > 0 {
			d.prune(ts)
		}
		ts++
		d.add(ts, ts-1, keys[j])
	}
}
