package cdcfeed_test

import (
	"fmt"
	"math/rand"
	"sort"
	"testing"

	"github.com/pingcap/kvproto/pkg/cdcpb"
)

// entrySizes lists the row count of every Entries event of evs.
func entrySizes(evs []*cdcpb.ChangeDataEvent) []int {
	var out []int
	for _, m := range evs {
		for _, ev := range m.Events {
			if e, ok := ev.Event.(*cdcpb.Event_Entries_); ok {
				out = append(out, len(e.Entries.Entries))
			}
		}
	}
	return out
}

// Rule F-1/F-9 (scan chunks): a small incremental scan is delivered
// ScanBatchRows (4) rows at a time; a large one in chunks of scan/32 rows,
// at most MaxScanBatchRows (1024), INITIALIZED riding on the last chunk.
func TestScanChunkSize(t *testing.T) {
	for _, tc := range []struct{ rows, chunk int }{{10, 4}, {128, 4}, {1000, 31}, {50000, 1024}} {
		t.Run(fmt.Sprint(tc.rows), func(t *testing.T) {
			c := newCluster(t, 1)
			cl := newClient(t, c)
			cp := c.Oracle().Next()
			tx := c.Begin()
			for i := 0; i < tc.rows; i++ {
				tx.Set([]byte(fmt.Sprintf("k%06d", i)), []byte("v"))
			}
			if _, err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			r := c.Regions()[0]
			cl.register(r, r.Leader, 1, cp, false)
			c.DeliverAll()
			evs, err := cl.streams[1].Recv()
			if err != nil {
				t.Fatal(err)
			}
			sizes := entrySizes(evs)
			for i, n := range sizes {
				want := tc.chunk
				if i == len(sizes)-1 {
					want = tc.rows - tc.chunk*i + 1 // the rest + INITIALIZED
				}
				if n != want {
					t.Fatalf("event %d of %d has %d rows, want %d (sizes %v)", i, len(sizes), n, want, sizes)
				}
			}
			if len(sizes) != (tc.rows+tc.chunk-1)/tc.chunk {
				t.Fatalf("%d events, want %d", len(sizes), (tc.rows+tc.chunk-1)/tc.chunk)
			}
		})
	}
}

// Rule F-1 (scan order): committed versions and locks merge into key
// order, a key's committed versions (in commit order) before its lock.
func TestScanMergesVersionsAndLocks(t *testing.T) {
	seed := *seedFlag
	rng := rand.New(rand.NewSource(seed))
	c := newCluster(t, seed)
	cl := newClient(t, c)
	cp := c.Oracle().Next()
	type want struct {
		versions int
		locked   bool
	}
	keys := map[string]*want{}
	for i := 0; i < 300; i++ {
		k := fmt.Sprintf("k%03d", rng.Intn(120))
		w := keys[k]
		if w == nil {
			w = &want{}
			keys[k] = w
		}
		if w.locked {
			continue
		}
		tx := c.Begin()
		tx.Set([]byte(k), []byte(fmt.Sprint(i)))
		if rng.Intn(5) == 0 {
			if err := tx.Prewrite(); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			w.locked = true
			continue
		}
		if _, err := tx.Commit(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		w.versions++
	}
	r := c.Regions()[0]
	cl.register(r, r.Leader, 1, cp, true)
	c.DeliverAll()
	evs, err := cl.streams[1].Recv()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	lastTs := map[string]uint64{}
	for _, m := range evs {
		for _, ev := range m.Events {
			for _, row := range ev.GetEntries().GetEntries() {
				k := string(row.Key)
				switch row.Type {
				case cdcpb.Event_COMMITTED:
					if row.CommitTs <= lastTs[k] {
						t.Fatalf("seed %d: %s versions out of commit order", seed, k)
					}
					lastTs[k] = row.CommitTs
					got = append(got, k+" C")
				case cdcpb.Event_PREWRITE:
					got = append(got, k+" P")
				}
			}
		}
	}
	var exp []string
	for k, w := range keys {
		for i := 0; i < w.versions; i++ {
			exp = append(exp, k+" C")
		}
		if w.locked {
			exp = append(exp, k+" P")
		}
	}
	sort.Strings(exp) // "k C" < "k P": versions first
	if fmt.Sprint(got) != fmt.Sprint(exp) {
		t.Fatalf("seed %d: scan order\n got %v\nwant %v", seed, got, exp)
	}
}

// Rule F-9 (bulk): a live queue longer than 8*MaxBatchRows is delivered in
// events of at most min(queue/8, MaxBulkBatchRows) rows; shorter queues in
// events of at most MaxBatchRows; per subscription order is kept.
func TestLiveBulkBatches(t *testing.T) {
	c := newCluster(t, 3)
	cl := newClient(t, c)
	r := c.Regions()[0]
	cl.register(r, r.Leader, 1, c.Oracle().Next(), false)
	cl.drain(1)
	const n = 3000
	tx := c.Begin()
	for i := 0; i < n; i++ {
		tx.Set([]byte(fmt.Sprintf("k%06d", i)), []byte("v"))
	}
	if _, err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// 2n rows queued (PREWRITE + COMMIT per key).
	queued, maxSeen := 2*n, 0
	for c.Step() {
		evs, err := cl.streams[1].Recv()
		if err != nil {
			t.Fatal(err)
		}
		for _, size := range entrySizes(evs) {
			most := 8
			if queued > 64 {
				most = min(queued/8, 256)
			}
			if size < 1 || size > most {
				t.Fatalf("event of %d rows with %d queued (at most %d)", size, queued, most)
			}
			maxSeen = max(maxSeen, size)
			queued -= size
		}
	}
	if queued != 0 {
		t.Fatalf("%d rows never delivered", queued)
	}
	if maxSeen <= 8 {
		t.Fatalf("a bulk queue was delivered at most %d rows per event", maxSeen)
	}
}
