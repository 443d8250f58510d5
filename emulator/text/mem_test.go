package text

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func mustMem(t *testing.T, fields ...string) *Mem {
	t.Helper()
	m, err := OpenMem(fields)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// Rule TXT-M3: Mem's score is textbook BM25 (k1 = 1.2, b = 0.75) summed
// over the searched fields and the query's distinct terms, with N the live
// documents, n those having the term in the field and avgdl the field's
// mean token count over the N documents.
func TestMemBM25FormulaTXTM3(t *testing.T) {
	m := mustMem(t, "title", "body")
	require.NoError(t, m.Apply([]Op{
		up("d1", "body", "apple banana", "title", "banana"),
		up("d2", "body", "apple cherry"),
		up("d3", "body", "durian"),
		up("d4", "body", "elder fig grape"),
		up("d5", "body", "gone"),
		{PK: "d5", Delete: true}, // deleted: counts nowhere
	}))
	bm := func(N, n, tf, dl, avgdl float64) float64 {
		idf := math.Log(1 + (N-n+0.5)/(n+0.5))
		return idf * tf * 2.2 / (tf + 1.2*(0.25+0.75*dl/avgdl))
	}
	// body: 8 tokens over 4 documents; title: 1 token over 4 documents.
	want := bm(4, 1, 1, 2, 8.0/4) + bm(4, 1, 1, 1, 1.0/4)
	hits, err := m.Search("banana banana BANANA", nil, 10, nil) // distinct terms only
	require.NoError(t, err)
	require.Equal(t, []string{"d1"}, pks(hits))
	require.InDelta(t, want, hits[0].Score, 1e-12)

	hits, err = m.Search("apple", []string{"body"}, 10, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"d1", "d2"}, pks(hits)) // equal scores: PK order
	require.InDelta(t, bm(4, 2, 1, 2, 2), hits[0].Score, 1e-12)
	require.Equal(t, hits[0].Score, hits[1].Score)

	// A stop-word-only query matches nothing (TXT-S1).
	hits, total, err := m.SearchTotal("the and of", nil, 10, nil)
	require.NoError(t, err)
	require.Empty(t, hits)
	require.Zero(t, total)
}

// Rule TXT-M2: the ASCII fast path produces exactly the terms of bleve's
// standard analyzer, on random text mixing the fast path's alphabet with
// punctuation and non-ASCII letters (which take the analyzer).
func TestFastTokensMatchAnalyzer(t *testing.T) {
	s := seed(t)
	r := rand.New(rand.NewSource(s))
	m := mustMem(t, "f")
	pieces := []string{"a", "B", "z", "Q", "0", "7", "the", "The", "AND", "x9", "9x", " ", " ", "  ", "\t", "\n", "\r\n",
		".", ",", "'", "-", "_", ":", "é", "日本", "ß", "3.14", "can't", "e-mail"}
	for i := 0; i < 20000; i++ {
		var b strings.Builder
		for j := r.Intn(12); j >= 0; j-- {
			p := pieces[r.Intn(len(pieces))]
			if i%2 == 0 && !simpleASCII(p) {
				continue // half the cases stay on the fast path
			}
			b.WriteString(p)
		}
		in := b.String()
		var want []string
		for _, tok := range m.analyzer.Analyze([]byte(in)) {
			want = append(want, string(tok.Term))
		}
		got := m.tokens(in, nil)
		require.Equal(t, want, got, "seed %d input %q (fast path %v)", s, in, simpleASCII(in))
	}
}

// Rule TXT-M4: after any sequence of upserts and deletes (crossing many
// compactions), searches answer exactly what a fresh index of the final
// documents answers, same keys, same order, same scores.
func TestMemCompactionAgainstFresh(t *testing.T) {
	s := seed(t)
	r := rand.New(rand.NewSource(s))
	vocab := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "India", "the"}
	words := func() string {
		var w []string
		for i := 0; i < 1+r.Intn(6); i++ {
			w = append(w, vocab[r.Intn(len(vocab))])
		}
		return strings.Join(w, " ")
	}
	m := mustMem(t, "a", "b")
	model := map[string]map[string]string{}
	compactions := 0
	for round := 0; round < 60; round++ {
		var ops []Op
		for i := 0; i < 500; i++ {
			pk := "k" + strconv.Itoa(r.Intn(300))
			if r.Intn(5) == 0 {
				ops = append(ops, Op{PK: pk, Delete: true})
				delete(model, pk)
				continue
			}
			f := map[string]string{"a": words()}
			if r.Intn(2) == 0 {
				f["b"] = words()
			}
			ops = append(ops, Op{PK: pk, Fields: f})
			model[pk] = f
		}
		before := m.docs.n
		require.NoError(t, m.Apply(ops), "seed %d round %d", s, round)
		if m.docs.n < before {
			compactions++
		}
	}
	require.Greater(t, compactions, 2, "seed %d: the test must cross compactions", s)

	fresh := mustMem(t, "a", "b")
	keys := make([]string, 0, len(model))
	for pk := range model {
		keys = append(keys, pk)
	}
	sort.Strings(keys)
	var ops []Op
	for _, pk := range keys {
		ops = append(ops, Op{PK: pk, Fields: model[pk]})
	}
	require.NoError(t, fresh.Apply(ops))
	for _, q := range append(vocab, "alpha bravo", "golf india hotel", "nothing") {
		for _, fields := range [][]string{nil, {"a"}, {"b"}} {
			got, err := m.SearchAll(q, fields, nil)
			require.NoError(t, err)
			want, err := fresh.SearchAll(q, fields, nil)
			require.NoError(t, err)
			require.Equal(t, want, got, "seed %d query %q fields %v", s, q, fields)
			top, total, err := m.SearchTotal(q, fields, 7, nil)
			require.NoError(t, err)
			require.EqualValues(t, len(want), total)
			require.Equal(t, want[:min(7, len(want))], top, "seed %d query %q", s, q)
		}
	}
}

// Rules TXT-M1 and TXT-S6: both engines match the same documents on the
// same corpus (punctuation and non-ASCII text included); only the scores,
// hence the order, differ (TXT-M3).
func TestMemMatchesBleveSets(t *testing.T) {
	s := seed(t)
	r := rand.New(rand.NewSource(s))
	vocab := []string{"Apple", "pie", "e-mail", "can't", "3.14", "naïve", "café", "日本語", "x_y", "end.", "the", "of"}
	mem := mustMem(t, "t")
	bl := mustOpen(t, "", "t")
	var ops []Op
	for i := 0; i < 400; i++ {
		var w []string
		for j := 0; j < 1+r.Intn(5); j++ {
			w = append(w, vocab[r.Intn(len(vocab))])
		}
		ops = append(ops, up(fmt.Sprintf("d%03d", i), "t", strings.Join(w, " ")))
		if i%7 == 0 {
			ops = append(ops, Op{PK: fmt.Sprintf("d%03d", i/2), Delete: true})
		}
	}
	require.NoError(t, mem.Apply(ops))
	require.NoError(t, bl.Apply(ops))
	for _, q := range vocab {
		a, err := mem.SearchAll(q, nil, nil)
		require.NoError(t, err)
		b, err := bl.SearchAll(q, nil, nil)
		require.NoError(t, err)
		ak, bk := pks(a), pks(b)
		sort.Strings(ak)
		sort.Strings(bk)
		require.Equal(t, bk, ak, "seed %d query %q", s, q)
	}
}

// Rule TXT-M5: a search sees a batch whole or not at all, while batches
// are applied concurrently (run with -race).
func TestMemBatchesAtomicForSearches(t *testing.T) {
	m := mustMem(t, "t")
	const docs = 200
	batch := func(round int) []Op {
		ops := make([]Op, 0, docs)
		for i := 0; i < docs; i++ {
			ops = append(ops, up(strconv.Itoa(i), "t", "common round"+strconv.Itoa(round)))
		}
		return ops
	}
	require.NoError(t, m.Apply(batch(0)))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				hits, total, err := m.SearchTotal("common", nil, 5, nil)
				if err != nil || total != docs || len(hits) != 5 {
					t.Errorf("search saw a partial batch: total %d hits %d err %v", total, len(hits), err)
					return
				}
				all, err := m.SearchAll("common", nil, nil)
				if err != nil || len(all) != docs {
					t.Errorf("SearchAll saw %d documents, want %d (err %v)", len(all), docs, err)
					return
				}
			}
		}()
	}
	for round := 1; round < 200; round++ {
		require.NoError(t, m.Apply(batch(round)))
	}
	close(stop)
	wg.Wait()
	n, err := m.Count()
	require.NoError(t, err)
	require.EqualValues(t, docs, n)
	require.LessOrEqual(t, m.docs.n, 2*docs+compactMin+1, "retired ids are compacted")
	require.NoError(t, m.Close())
	_, err = m.Search("common", nil, 1, nil)
	require.ErrorContains(t, err, "closed")
	require.ErrorContains(t, m.Apply(batch(1)), "closed")
}

// topHits selects exactly the first w of a full sort, in both of its
// modes (heap for a short page over many matches, sort otherwise).
func TestTopHitsIsSortedPrefix(t *testing.T) {
	s := seed(t)
	r := rand.New(rand.NewSource(s))
	for i := 0; i < 200; i++ {
		n := r.Intn(300)
		var all []Hit
		for j := 0; j < n; j++ {
			all = append(all, Hit{PK: strconv.Itoa(j), Score: float64(r.Intn(20))})
		}
		want := slices.Clone(all)
		slices.SortFunc(want, hitOrder)
		w := 1 + r.Intn(60)
		got := topHits(slices.Clone(all), w)
		require.Equal(t, want[:min(w, n)], got, "seed %d n %d w %d", s, n, w)
	}
}

// Rule TXT-A3 for Op.Texts: the positional form indexes what the map form
// does ("" = absent), and a malformed op is refused before anything changes.
func TestOpTexts(t *testing.T) {
	forEachEngine(t, func(t *testing.T, open opener) {
		x := open(t, "title", "body")
		require.NoError(t, x.Apply([]Op{{PK: "1", Texts: []string{"red fox", ""}}, {PK: "2", Texts: []string{"", "red whale"}}}))
		h, err := x.Search("red", []string{"title"}, 10, nil)
		require.NoError(t, err)
		require.Equal(t, []string{"1"}, pks(h))
		h, err = x.Search("red", nil, 10, nil)
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"1", "2"}, pks(h))

		require.ErrorContains(t, x.Apply([]Op{{PK: "3", Texts: []string{"a"}}}), `op 0 (pk "3"): 1 texts for 2 fields`)
		require.ErrorContains(t, x.Apply([]Op{up("4", "title", "x"), {PK: "3", Texts: []string{"a", "b"}, Fields: map[string]string{"title": "a"}}}), "not both")
		require.ErrorContains(t, x.Apply([]Op{{PK: "1", Delete: true, Texts: []string{"", ""}}}), "delete must not carry fields")
		n, err := x.Count()
		require.NoError(t, err)
		require.EqualValues(t, 2, n, "refused batches change nothing")
	})
}
