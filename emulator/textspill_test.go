package emulator

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/text"
)

// spillWords are the titles' vocabulary: lower-case, no stop words, so a
// one-word query matches exactly the titles holding the word.
var spillWords = []string{"amber", "birch", "cedar", "dune", "ember", "fjord", "grove", "heath", "inlet", "juniper", "kelp", "lagoon"}

// matchKeys searches q and returns the sorted keys and the total.
func matchKeys(t *testing.T, e *Emulator, q string) ([]string, uint64, error) {
	t.Helper()
	resp, err := e.Search(bg, &apiv1.SearchRequest{Collection: "items", Text: &apiv1.TextQuery{Query: q}, KeysOnly: true, Limit: MaxSearchLimit})
	if err != nil {
		return nil, 0, err
	}
	var keys []string
	for _, h := range resp.GetHits() {
		keys = append(keys, h.GetPrimaryKey())
	}
	sort.Strings(keys)
	return keys, resp.GetTotal(), nil
}

// modelKeys is the keys whose title holds word.
func modelKeys(model map[int]string, word string) []string {
	var out []string
	for id, title := range model {
		if strings.Contains(" "+title+" ", " "+word+" ") {
			out = append(out, fmt.Sprint(id))
		}
	}
	sort.Strings(out)
	return out
}

// Rules TXT-M7 and TXT-M8: with a small Options.TextMemoryBudget the
// collection's text index moves from memory to the bleve engine exactly
// once, logged in one line and reported by TextEngine and the
// sfemu_text_memory_bytes metric; the match sets before and after the move
// equal the documents' (seeded upserts and deletes, many batches still
// queued when the move happens); and a search loop running through the
// move never gets an empty answer or an error for a word ten
// never-changed documents hold.
func TestTextSpillTXTM7(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewSource(seed))
	var logMu sync.Mutex
	var logs []string
	e := openMem(t, Options{TextMemoryBudget: 96 << 10, TextScratchDir: t.TempDir(), Logf: func(f string, a ...any) {
		logMu.Lock()
		logs = append(logs, fmt.Sprintf(f, a...))
		logMu.Unlock()
	}})
	tok := mustCreate(t, e, itemsDef("items"), 1).GetSchemaGenerationToken()
	model := map[int]string{}
	seq, ts := uint64(1), uint64(10)
	title := func() string {
		var w []string
		for i := 0; i < 1+r.Intn(5); i++ {
			w = append(w, spillWords[r.Intn(len(spillWords))])
		}
		return strings.Join(w, " ")
	}
	// First batch: ten fixed documents that always match "steady".
	var muts []*apiv1.Mutation
	for id := 0; id < 10; id++ {
		model[id] = "steady " + title()
		muts = append(muts, itemUpsert(seq, ts, id, model[id], "t", 1, nil))
		seq++
	}
	mustIngest(t, e, mb("table:100", 1, tok, muts...))
	mustAdvance(t, e, "table:100", 1, ts)
	e.WaitIndexed()
	check := func(when, wantEngine string) {
		t.Helper()
		eng, _, ok := e.TextEngine("items")
		if !ok || eng != wantEngine {
			t.Fatalf("TXT-M7 seed %d: %s: engine %q (ok %v), want %q", seed, when, eng, ok, wantEngine)
		}
		for _, w := range append([]string{"steady"}, spillWords...) {
			got, total, err := matchKeys(t, e, w)
			want := modelKeys(model, w)
			if err != nil || fmt.Sprint(got) != fmt.Sprint(want) || int(total) != len(want) {
				t.Fatalf("TXT-M7 seed %d: %s: search %q: %v total %d err %v, want %v", seed, when, w, got, total, err, want)
			}
		}
	}
	check("before the budget is reached", text.EngineMem)

	stop := make(chan struct{})
	var searches, bad atomic.Int64
	var firstBad atomic.Value
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			keys, _, err := matchKeys(t, e, "steady")
			searches.Add(1)
			if err != nil || len(keys) != 10 {
				if bad.Add(1) == 1 {
					firstBad.Store(fmt.Sprintf("%v (err %v)", keys, err))
				}
			}
		}
	}()
	for b := 0; b < 40; b++ {
		ts++
		muts = muts[:0]
		// A key at most once per batch: a second mutation at the same
		// commit ts would be stale (E41), which the model does not follow.
		used := map[int]bool{}
		for i := 0; i < 100; i++ {
			id := 10 + r.Intn(3000)
			if used[id] {
				continue
			}
			used[id] = true
			if _, ok := model[id]; ok && r.Intn(6) == 0 {
				delete(model, id)
				muts = append(muts, del(seq, ts, id))
			} else {
				model[id] = title()
				muts = append(muts, itemUpsert(seq, ts, id, model[id], "t", 1, nil))
			}
			seq++
		}
		mustIngest(t, e, mb("table:100", 1, tok, muts...))
		mustAdvance(t, e, "table:100", 1, ts)
	}
	e.WaitIndexed()
	close(stop)
	wg.Wait()
	if bad.Load() > 0 {
		t.Fatalf("TXT-M8 seed %d: %d of %d searches during the move were not the 10 steady documents; first: %v", seed, bad.Load(), searches.Load(), firstBad.Load())
	}
	check("after the move", text.EngineBleve)
	logMu.Lock()
	defer logMu.Unlock()
	if len(logs) != 1 || !strings.Contains(logs[0], `collection "items": text index passed its memory budget`) {
		t.Fatalf("TXT-M7 seed %d: want one log line about the move, got %q", seed, logs)
	}
	t.Logf("seed %d: %d searches during ingest and the move; %s", seed, searches.Load(), logs[0])
	metrics := metricsText(t, e)
	if !strings.Contains(metrics, `sfemu_text_memory_bytes{collection="items",engine="bleve"} 0`) {
		t.Fatalf("TXT-M7: metric missing:\n%s", metrics)
	}
}
