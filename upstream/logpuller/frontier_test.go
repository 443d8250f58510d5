package logpuller

import (
	"flag"
	"math"
	"math/rand"
	"sort"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
	"github.com/stretchr/testify/require"
)

var seedFlag = flag.Int64("seed", 0, "seed for randomized tests (0 = time based)")

func testSeed(t *testing.T) int64 {
	s := *seedFlag
	if s == 0 {
		s = time.Now().UnixNano()
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("reproduce with: go test -run %s -seed %d", t.Name(), s)
		}
	})
	return s
}

// TestFrontierRandomized drives the frontier through random subscriptions,
// resolved advances and failures, and checks after every step that the
// ranges cover the span exactly once and that min() equals a reference
// computed from per-handle timestamps.
// rule: LP7, LP8
func TestFrontierRandomized(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	const handles = 64
	span := kvevent.Span{StartKey: splitAt(0), EndKey: splitAt(handles)}
	f := newFrontier(span, 5)
	ref := make([]uint64, handles) // resolved ts per handle slot
	owner := make([]uint64, handles)
	for i := range ref {
		ref[i] = 5
	}
	nextRegion := uint64(1)
	for step := 0; step < 3000; step++ {
		switch rng.Intn(3) {
		case 0: // subscribe a random sub-range of a hole
			holes := f.holes()
			if len(holes) == 0 {
				continue
			}
			h := holes[rng.Intn(len(holes))]
			lo, hi := slotOf(t, h.Span.StartKey), slotOf(t, h.Span.EndKey)
			a := lo + rng.Intn(hi-lo)
			b := a + 1 + rng.Intn(hi-a)
			ts, err := f.lock(kvevent.Span{StartKey: splitAt(int64(a)), EndKey: splitAt(int64(b))}, nextRegion)
			require.NoError(t, err, "seed %d step %d", seed, step)
			want := uint64(math.MaxUint64)
			for i := a; i < b; i++ {
				want = min(want, ref[i])
				require.Zero(t, owner[i])
			}
			require.Equal(t, want, ts, "checkpoint = min of the covered pieces (seed %d)", seed)
			for i := a; i < b; i++ {
				ref[i], owner[i] = ts, nextRegion
			}
			nextRegion++
		case 1: // advance a random owner
			ids := ownersOf(owner)
			if len(ids) == 0 {
				continue
			}
			id := ids[rng.Intn(len(ids))]
			ts := uint64(rng.Intn(200))
			f.forward(id, ts)
			for i := range owner {
				if owner[i] == id && ts > ref[i] {
					ref[i] = ts
				}
			}
		case 2: // fail a random owner
			ids := ownersOf(owner)
			if len(ids) == 0 {
				continue
			}
			id := ids[rng.Intn(len(ids))]
			_, _, ok := f.unlock(id)
			require.True(t, ok)
			for i := range owner {
				if owner[i] == id {
					owner[i] = 0
				}
			}
		}
		require.NoError(t, f.check(), "seed %d step %d", seed, step)
		want := uint64(math.MaxUint64)
		for _, v := range ref {
			want = min(want, v)
		}
		require.Equal(t, want, f.min(), "seed %d step %d", seed, step)
	}
}

func ownersOf(owner []uint64) []uint64 {
	seen := map[uint64]bool{}
	var ids []uint64
	for _, o := range owner {
		if o != 0 && !seen[o] {
			seen[o] = true
			ids = append(ids, o)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

func slotOf(t *testing.T, comparable []byte) int {
	_, raw, err := codec.DecodeBytes(comparable, nil)
	require.NoError(t, err)
	k := raw[len(raw)-8:]
	var v uint64
	for _, b := range k {
		v = v<<8 | uint64(b)
	}
	return int(int64(v ^ (1 << 63)))
}

// BenchmarkResolvedPerRegion10k: a span of 10k regions whose resolved ts
// arrive one region per message (regions with rows queued get theirs
// behind the rows, old clients get them per region). One op = one region
// message; every 10k ops is one full round that moves the span.
func BenchmarkResolvedPerRegion10k(b *testing.B) {
	const regions = 10000
	p, err := NewSpanPuller(Config{Span: tableSpan(1), StartTs: 10, Consumer: &nopConsumer{}})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < regions; i++ {
		sub := kvevent.Span{StartKey: splitAt(int64(i)), EndKey: splitAt(int64(i + 1))}
		if i == 0 {
			sub.StartKey = tableSpan(1).StartKey
		}
		if i == regions-1 {
			sub.EndKey = tableSpan(1).EndKey
		}
		if _, err := p.AddRegion(uint64(i+1), 1, sub); err != nil {
			b.Fatal(err)
		}
		if _, err := p.HandleEvent(rowsEv(uint64(i+1), 1, initialized())); err != nil {
			b.Fatal(err)
		}
	}
	rts := resolved(0, 1, 0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rts.Ts = 20 + uint64(i/regions)
		rts.Regions[0] = uint64(i%regions + 1)
		p.HandleResolvedTs(rts)
	}
	if b.N >= regions && p.ResolvedTs() < 20 {
		b.Fatalf("span resolved ts %d never moved", p.ResolvedTs())
	}
}
