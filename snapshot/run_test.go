package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"github.com/searchfabric/sfemu/memquota"
	"github.com/searchfabric/sfemu/upstream/kvevent"
)

// memReader is a snapshot reader over sorted keys (every ts sees them).
type memReader struct{ keys [][]byte }

func (m *memReader) Get(context.Context, []byte, uint64) ([]byte, error) { return nil, nil }
func (m *memReader) GCSafePoint(context.Context) (uint64, error)         { return 0, nil }
func (m *memReader) Scan(ctx context.Context, start, end []byte, ts uint64, limit int) ([]kvevent.KV, error) {
	i := sort.Search(len(m.keys), func(i int) bool { return bytes.Compare(m.keys[i], start) >= 0 })
	var out []kvevent.KV
	for ; i < len(m.keys) && (len(end) == 0 || bytes.Compare(m.keys[i], end) < 0) && len(out) < limit; i++ {
		out = append(out, kvevent.KV{Key: m.keys[i], Value: make([]byte, 100)})
	}
	return out, nil
}

// recWriter records the keys written per table and the writes in flight.
type recWriter struct {
	mu       sync.Mutex
	seen     map[string]int
	finished map[int]uint64
	active   int
	peak     int
	failAt   int // fail the failAt-th chunk (0: never)
	chunks   int
}

func (w *recWriter) WriteChunk(_ context.Context, table int, kvs []kvevent.KV) error {
	w.mu.Lock()
	w.chunks++
	if w.chunks == w.failAt {
		w.mu.Unlock()
		return errors.New("ingest failed")
	}
	w.active++
	w.peak = max(w.peak, w.active)
	for _, kv := range kvs {
		w.seen[fmt.Sprintf("%d/%s", table, kv.Key)]++
	}
	w.active--
	w.mu.Unlock()
	return nil
}

func (w *recWriter) FinishTable(_ context.Context, table int, rows uint64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.finished[table] = rows
	return nil
}

func newRec() *recWriter { return &recWriter{seen: map[string]int{}, finished: map[int]uint64{}} }

// fixture: two tables of n keys each, split in 5 and 1 ranges.
func fixture(t *testing.T, n int) (*memReader, *State) {
	var keys [][]byte
	for _, p := range []string{"a", "b"} {
		for i := 0; i < n; i++ {
			keys = append(keys, []byte(fmt.Sprintf("%s%06d", p, i)))
		}
	}
	r0, err := SplitSpan([]byte("a"), []byte("b"), [][]byte{[]byte("a000100"), []byte("a000200"), []byte("a000300"), []byte("a000400")})
	if err != nil {
		t.Fatal(err)
	}
	r1, _ := SplitSpan([]byte("b"), []byte("c"), nil)
	return &memReader{keys: keys}, &State{Version: StateVersion, Ts: 10, Epoch: 1, Tables: []Table{
		{Name: "t.a", Collection: "t.a", PhysicalID: 1, Ranges: r0}, {Name: "t.b", Collection: "t.b", PhysicalID: 2, Ranges: r1}}}
}

// TestSN4_QuotaBoundsChunksHeld: with a quota of about one chunk and four
// workers, the chunks held at once stay within the quota (a chunk alone
// always proceeds), and every key arrives exactly once.
func TestSN4_QuotaBoundsChunksHeld(t *testing.T) {
	rd, st := fixture(t, 500)
	chunk := chunkBytes([]kvevent.KV{{Key: []byte("a000000"), Value: make([]byte, 100)}}) * 32
	q, err := memquota.New("memory-quota", chunk+chunk/2)
	if err != nil {
		t.Fatal(err)
	}
	w := newRec()
	if err := Run(context.Background(), st, Config{Reader: rd, Writer: w, Concurrency: 4, ChunkRows: 32, Quota: q}); err != nil {
		t.Fatal(err)
	}
	if q.Peak() > q.Limit() || q.Used() != 0 {
		t.Errorf("quota peak %d used %d, limit %d", q.Peak(), q.Used(), q.Limit())
	}
	if len(w.seen) != 1000 {
		t.Fatalf("%d keys written, want 1000", len(w.seen))
	}
	for k, n := range w.seen {
		if n != 1 {
			t.Fatalf("%s written %d times", k, n)
		}
	}
	if w.finished[0] != 500 || w.finished[1] != 500 || !st.Tables[0].Finished || !st.Tables[1].Finished {
		t.Errorf("finished %v, state %v %v", w.finished, st.Tables[0].Finished, st.Tables[1].Finished)
	}
}

// TestSN6_StopAndResume: a run stopped at a random chunk (seeded) or by a
// failed write leaves a state that, saved and loaded, resumes with the
// ranges not acknowledged: every key is acknowledged once overall, and only
// a chunk that failed before its acknowledgement is written again.
func TestSN6_StopAndResume(t *testing.T) {
	for seed := int64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			rd, st := fixture(t, 300)
			path := filepath.Join(t.TempDir(), FileName)
			w := newRec()
			stopAt := 1 + rng.Intn(15)
			failWrite := rng.Intn(2) == 0
			var n int
			var mu sync.Mutex
			cfg := Config{Reader: rd, Writer: w, Concurrency: 1 + rng.Intn(4), ChunkRows: 16,
				Save: func(s *State) error { return Save(path, s) }, SaveEvery: 1}
			if failWrite {
				w.failAt = stopAt
			} else {
				cfg.AfterChunk = func(Task, int) error {
					mu.Lock()
					defer mu.Unlock()
					if n++; n == stopAt {
						return errors.New("stop")
					}
					return nil
				}
			}
			if err := Save(path, st); err != nil { // as the adapter does before its first run
				t.Fatal(err)
			}
			if err := Run(context.Background(), st, cfg); err == nil {
				t.Fatal("run did not stop")
			}
			loaded, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			w.failAt, cfg.AfterChunk = 0, nil
			if err := Run(context.Background(), loaded, cfg); err != nil {
				t.Fatal(err)
			}
			if len(w.seen) != 600 {
				t.Fatalf("%d keys written, want 600 (seed %d)", len(w.seen), seed)
			}
			var acked uint64
			for _, tb := range loaded.Tables {
				acked += tb.Rows()
				if !tb.AllRead() || !tb.Finished {
					t.Fatalf("table %s not finished after the resume", tb.Name)
				}
			}
			if acked != 600 {
				t.Fatalf("%d rows acknowledged, want 600 (seed %d)", acked, seed)
			}
		})
	}
}
