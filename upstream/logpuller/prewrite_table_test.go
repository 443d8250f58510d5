package logpuller

import (
	"fmt"
	"math/rand"
	"runtime"
	"testing"

	"github.com/pingcap/kvproto/pkg/cdcpb"
	"github.com/stretchr/testify/require"
)

// LP1/LP13: the matcher's open-addressing table against a Go map (seeded:
// -seed): random inserts, replacements and removals over few start ts and
// keys, so probe runs collide, entries move on removal, chunks come and
// go and the index grows and shrinks. After every step the table finds
// exactly the model's entries with their values (nil and empty kept
// apart), and its bytes equal a recount of its index, chunks and copies.
func TestLP13_PrewriteTableAgainstMap(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	var tb prewriteTable
	model := map[matchKey]cachedPrewrite{}
	keys := 4000
	for step := 0; step < 60_000; step++ {
		if step == 30_000 {
			keys = 50 // the table shrinks back
		}
		k := matchKey{startTs: uint64(10 + rng.Intn(3)), key: string(rawKey(1, int64(rng.Intn(keys))))}
		h := keyHash(k)
		slot, in := tb.find(h, k.startTs, k.key)
		want, held := model[k]
		require.Equal(t, held, in >= 0, "seed %d step %d", seed, step)
		switch {
		case held && rng.Intn(3) > 0 || step >= 30_000 && held:
			got := tb.entry(in).prewrite()
			require.Equal(t, string(want.value), string(got.value), "seed %d step %d", seed, step)
			require.Equal(t, string(want.oldValue), string(got.oldValue), "seed %d step %d", seed, step)
			tb.remove(slot, in)
			delete(model, k)
		default:
			r := &cdcpb.Event_Row{StartTs: k.startTs, Key: []byte(k.key)}
			switch rng.Intn(3) {
			case 0:
				r.Value = []byte(fmt.Sprintf("v%d", step))
			case 1:
				r.Value, r.OldValue = []byte{}, []byte(fmt.Sprintf("old%d", step))
			}
			if held {
				tb.replace(in, r)
			} else {
				g := tb.growth() + allocSize(len(r.Key)+len(r.Value)+len(r.OldValue))
				require.Equal(t, g, tb.insert(h, slot, r), "%s: growth foretold", "seed %d step %d", seed, step)
			}
			model[k] = cachedPrewrite{value: r.Value, oldValue: r.OldValue}
		}
		if step%997 == 0 || len(model) < 3 {
			m := matcher{held: tb, bytes: tb.bytes}
			checkMatcher(1, &m)
			require.Equal(t, len(model), tb.n, "seed %d step %d", seed, step)
			for mk, mv := range model {
				_, i := tb.find(keyHash(mk), mk.startTs, mk.key)
				require.GreaterOrEqual(t, i, 0, "seed %d step %d", seed, step)
				p := tb.entry(i).prewrite()
				require.Equal(t, mv.value == nil, p.value == nil, "seed %d step %d", seed, step)
				require.Equal(t, mv.oldValue == nil, p.oldValue == nil, "seed %d step %d", seed, step)
			}
		}
	}
	for k := range model {
		slot, in := tb.find(keyHash(k), k.startTs, k.key)
		tb.remove(slot, in)
	}
	require.Equal(t, prewriteTable{}, tb, "an emptied table frees everything")
}

// LP13/LP14: the heap a region's held prewrites took goes back with them:
// once their COMMITs took them all, and once a spill wrote them to a run
// (then only the run's index stays, and it is charged, LP18). A Go map
// kept its slots after the commit took every entry, uncharged.
func TestLP13_MatcherGivesItsHeapBack(t *testing.T) {
	const n = 100_000
	for _, how := range []string{"commit", "spill"} {
		mem := mustQuota(t, "memory-quota", 1<<40)
		// Runs go nowhere (none is read here), so the heap shows what the
		// matcher keeps.
		store := discardStore{}
		p, err := NewSpanPuller(Config{Span: tableSpan(1), StartTs: 10, Consumer: nullConsumer{}, MatcherQuota: 1 << 40,
			Matcher: MatcherMemory{Memory: mem, Store: store}})
		require.NoError(t, err)
		_, err = p.AddRegion(1, 100, tableSpan(1))
		require.NoError(t, err)
		send := func(typ cdcpb.Event_LogType, from, to int) {
			rows := make([]*cdcpb.Event_Row, 0, to-from)
			for i := from; i < to; i++ {
				rows = append(rows, &cdcpb.Event_Row{Type: typ, OpType: cdcpb.Event_Row_PUT, StartTs: 20, CommitTs: 30, Key: rawKey(1, int64(i)), Value: []byte("a value of thirty bytes.......")})
			}
			_, err := p.HandleEvent(&cdcpb.Event{RegionId: 1, RequestId: 100, Event: &cdcpb.Event_Entries_{Entries: &cdcpb.Event_Entries{Entries: rows}}})
			require.NoError(t, err)
		}
		send(cdcpb.Event_INITIALIZED, 0, 0)
		var held int
		grew := heapGrowth(func() {
			for i := 0; i < n; i += 1000 {
				send(cdcpb.Event_PREWRITE, i, i+1000)
			}
			held = p.MatcherBytes()
			switch how {
			case "commit":
				for i := 0; i < n; i += 1000 {
					send(cdcpb.Event_COMMIT, i, i+1000)
				}
			case "spill":
				mem.SetReserve(0)
				require.True(t, mem.TryAcquire(mem.Limit()-mem.Used()), "others take the rest of the quota")
				send(cdcpb.Event_PREWRITE, n, n+1) // does not fit: the region spills
			}
		})
		t.Logf("%s: %d prewrites held %d B; after the %s the heap is %d B above the start, %d B charged to the matcher, %d B of run index",
			how, n, held, how, grew, p.MatcherBytes(), p.IndexBytes())
		// After the spill the prewrite that did not fit is held alone.
		require.Less(t, p.MatcherBytes(), 1024, how)
		// What stays: the delivered set (commit), the run's index
		// (spill: a bloom filter and block keys, ~2 B a prewrite), slack.
		dheld, _ := p.DeliveredBytes()
		require.Less(t, grew, dheld+int64(n*3)+int64(held/20), "%s: the table's heap stayed", how)
		runtime.KeepAlive(p)
	}
}

// discardStore is a PrewriteStore that writes nowhere.
type discardStore struct{}

type discardWriter struct{ off int64 }

type discardRun struct{}

func (discardStore) Create(uint64) (PrewriteWriter, error)    { return &discardWriter{}, nil }
func (discardStore) CreateDelivered() (PrewriteWriter, error) { return &discardWriter{}, nil }

func (w *discardWriter) Append(rec *PrewriteRecord) (int64, error) {
	off := w.off
	w.off += rec.SpillCost()
	return off, nil
}
func (w *discardWriter) Finish() (PrewriteRun, error) { return discardRun{}, nil }
func (w *discardWriter) Abort() error                 { return nil }

func (discardRun) Name() string { return "discarded" }
func (discardRun) ReadBlock(int64, int) ([]PrewriteRecord, error) {
	return nil, fmt.Errorf("a discarded run is never read")
}
func (discardRun) Remove() error { return nil }
