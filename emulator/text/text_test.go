package text

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var seedFlag = flag.Int64("text.seed", 0, "seed for randomized text tests (0 = fixed default)")

func seed(t *testing.T) int64 {
	s := *seedFlag
	if s == 0 {
		if v := os.Getenv("SFEMU_TEST_SEED"); v != "" {
			s, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	if s == 0 {
		s = 20261129
	}
	t.Logf("seed=%d (rerun with -text.seed=%d)", s, s)
	return s
}

func mustOpen(t *testing.T, dir string, fields ...string) *Index {
	t.Helper()
	x, err := Open(dir, fields)
	require.NoError(t, err)
	t.Cleanup(func() { _ = x.Close() })
	return x
}

func pks(h []Hit) []string {
	out := make([]string, len(h))
	for i := range h {
		out[i] = h[i].PK
	}
	return out
}

func up(pk string, kv ...string) Op {
	f := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		f[kv[i]] = kv[i+1]
	}
	return Op{PK: pk, Fields: f}
}

// Rule TXT-S1: scores are BM25 (k1=1.2, b=0.75) as computed by bleve, not TF-IDF.
func TestBM25ScoreMatchesFormula(t *testing.T) {
	x := mustOpen(t, "", "body")
	require.NoError(t, x.Apply([]Op{
		up("d1", "body", "apple banana"),
		up("d2", "body", "apple cherry"),
		up("d3", "body", "durian"),
		up("d4", "body", "elder fig grape"),
	}))
	hits, err := x.Search("banana", nil, 10, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"d1"}, pks(hits))

	// bleve's BM25: idf = ln(1 + (N-n+0.5)/(n+0.5)); avgdl = ceil(distinct
	// terms in the field / N) (a bleve simplification, see spec TXT-S1);
	// fieldLength from the stored norm = number of tokens.
	N, n := 4.0, 1.0
	idf := math.Log(1 + (N-n+0.5)/(n+0.5))
	avgdl := math.Ceil(7.0 / N)
	dl, tf, k1, b := 2.0, 1.0, 1.2, 0.75
	want := idf * tf * k1 / (tf + k1*(1-b+b*dl/avgdl))
	require.InDelta(t, want, hits[0].Score, 1e-6, "BM25 score")

	// A term present in every document still has a positive BM25 idf; with
	// TF-IDF ranking the shorter document would not be favoured the same way.
	hits, err = x.Search("apple", nil, 10, nil)
	require.NoError(t, err)
	require.Len(t, hits, 2)
	require.Greater(t, hits[0].Score, 0.0)
}

// Rule TXT-S1: rarer terms weigh more (idf), shorter fields rank higher for the
// same term frequency (length normalization), term frequency saturates.
func TestBM25RankingProperties(t *testing.T) {
	forEachEngine(t, func(t *testing.T, open opener) {
		x := open(t, "body")
		require.NoError(t, x.Apply([]Op{
			up("short", "body", "search engine"),
			up("long", "body", "search engine with a very long body of unrelated words about many other topics entirely"),
			up("rare", "body", "zebra"),
			up("c1", "body", "common"), up("c2", "body", "common"), up("c3", "body", "common zebra"),
		}))
		hits, err := x.Search("engine", nil, 10, nil)
		require.NoError(t, err)
		require.Equal(t, []string{"short", "long"}, pks(hits))
		require.Greater(t, hits[0].Score, hits[1].Score)

		// "zebra" (2 docs) is rarer than "common" (3 docs): c3 matching both
		// ranks first, then rare (zebra only), then c1/c2 in PK order.
		hits, err = x.Search("zebra common", nil, 10, nil)
		require.NoError(t, err)
		require.Equal(t, []string{"c3", "rare", "c1", "c2"}, pks(hits))
	})
}

// Rule TXT-S3: equal scores are ordered by ascending PK.
func TestTiesOrderedByPK(t *testing.T) {
	forEachEngine(t, func(t *testing.T, open opener) {
		x := open(t, "body")
		var ops []Op
		for _, pk := range []string{"m", "b", "z", "a", "q"} {
			ops = append(ops, up(pk, "body", "tied words"))
		}
		require.NoError(t, x.Apply(ops))
		hits, err := x.Search("tied", nil, 3, nil)
		require.NoError(t, err)
		require.Equal(t, []string{"a", "b", "m"}, pks(hits))

		// A tie straddling the k boundary, far deeper than the first window:
		// 20 strong hits, then 300 equal ones of which the smallest PKs win.
		y := open(t, "body")
		ops = nil
		for i := 0; i < 300; i++ {
			ops = append(ops, up(fmt.Sprintf("t%03d", 299-i), "body", "tied words here"))
		}
		for i := 0; i < 20; i++ {
			ops = append(ops, up(fmt.Sprintf("s%02d", i), "body", "tied tied tied"))
		}
		require.NoError(t, y.Apply(ops))
		hits, err = y.Search("tied", nil, 25, nil)
		require.NoError(t, err)
		require.Len(t, hits, 25)
		for i := 0; i < 20; i++ {
			require.Equal(t, fmt.Sprintf("s%02d", i), hits[i].PK)
		}
		require.Equal(t, []string{"t000", "t001", "t002", "t003", "t004"}, pks(hits[20:]))
	})
}

// Rules TXT-A1, TXT-A2: ops apply in order, last op for a PK wins, an upsert
// replaces all fields, delete removes.
func TestApplyOrderAndReplace(t *testing.T) {
	forEachEngine(t, func(t *testing.T, open opener) {
		x := open(t, "title", "body")
		require.NoError(t, x.Apply([]Op{
			up("1", "title", "red fox", "body", "quick"),
			up("2", "title", "blue whale"),
			{PK: "2", Delete: true},
			up("3", "title", "green frog"),
			up("3", "body", "lazy dog"), // replaces: title no longer indexed
		}))
		n, err := x.Count()
		require.NoError(t, err)
		require.EqualValues(t, 2, n)

		h, err := x.Search("whale", nil, 10, nil)
		require.NoError(t, err)
		require.Empty(t, h)
		h, err = x.Search("frog", nil, 10, nil)
		require.NoError(t, err)
		require.Empty(t, h, "replaced upsert must drop old field text")
		h, err = x.Search("dog", nil, 10, nil)
		require.NoError(t, err)
		require.Equal(t, []string{"3"}, pks(h))

		// Delete of an absent PK is a no-op, not an error.
		require.NoError(t, x.Apply([]Op{{PK: "nope", Delete: true}}))
	})
}

// Rule TXT-S2: field restriction.
func TestSearchFieldRestriction(t *testing.T) {
	forEachEngine(t, func(t *testing.T, open opener) {
		x := open(t, "title", "body")
		require.NoError(t, x.Apply([]Op{
			up("1", "title", "golang"),
			up("2", "body", "golang"),
		}))
		h, err := x.Search("golang", []string{"title"}, 10, nil)
		require.NoError(t, err)
		require.Equal(t, []string{"1"}, pks(h))
		h, err = x.Search("golang", nil, 10, nil)
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"1", "2"}, pks(h))
		// Field names with dots are single fields, not paths.
		y := open(t, "a.b")
		require.NoError(t, y.Apply([]Op{up("1", "a.b", "dotted")}))
		h, err = y.Search("dotted", nil, 10, nil)
		require.NoError(t, err)
		require.Equal(t, []string{"1"}, pks(h))
	})
}

// Rule TXT-A3 and TXT-S5: bad input is an error naming what was wrong, and a
// rejected batch changes nothing.
func TestBadInput(t *testing.T) {
	forEachEngine(t, func(t *testing.T, open opener) {
		_, err := Open("", nil)
		require.Error(t, err)
		_, err = Open("", []string{"a", "a"})
		require.ErrorContains(t, err, `"a" listed twice`)
		_, err = Open("", []string{""})
		require.ErrorContains(t, err, "empty name")
		_, err = OpenMem([]string{"a", "a"})
		require.ErrorContains(t, err, `"a" listed twice`)
		_, err = OpenEngine("lucene", "", []string{"a"})
		require.ErrorContains(t, err, `unknown engine "lucene"`)

		x := open(t, "title")
		err = x.Apply([]Op{up("1", "title", "ok"), up("2", "nope", "x")})
		require.ErrorContains(t, err, `op 1 (pk "2"): field "nope"`)
		n, err := x.Count()
		require.NoError(t, err)
		require.Zero(t, n, "rejected batch must not be partially applied")

		require.ErrorContains(t, x.Apply([]Op{{PK: ""}}), "empty primary key")
		require.ErrorContains(t, x.Apply([]Op{{PK: "1", Delete: true, Fields: map[string]string{"title": "x"}}}), "delete must not carry fields")

		_, err = x.Search("x", []string{"body"}, 10, nil)
		require.ErrorContains(t, err, `search field "body"`)
		_, err = x.Search("x", nil, 0, nil)
		require.ErrorContains(t, err, "k must be positive, got 0")
	})
}

// Rule TXT-S4: the filter is applied before taking the top k, also when the
// survivors are deep in the ranking.
func TestSearchFilterDeep(t *testing.T) {
	forEachEngine(t, func(t *testing.T, open opener) {
		x := open(t, "body")
		var ops []Op
		for i := 0; i < 500; i++ {
			// Lower i = more occurrences of "word" = higher score.
			ops = append(ops, up(fmt.Sprintf("%04d", i), "body", strings.Repeat("word ", 1+(500-i)/50)+"pad"))
		}
		require.NoError(t, x.Apply(ops))
		keep := func(pk string) bool { return pk >= "0490" }
		h, err := x.Search("word", nil, 5, keep)
		require.NoError(t, err)
		require.Len(t, h, 5)
		for _, hit := range h {
			require.True(t, keep(hit.PK), hit.PK)
		}
		// Fewer survivors than k: all of them.
		h, err = x.Search("word", nil, 50, keep)
		require.NoError(t, err)
		require.Len(t, h, 10)
		// Filter rejecting all.
		h, err = x.Search("word", nil, 5, func(string) bool { return false })
		require.NoError(t, err)
		require.Empty(t, h)
	})
}

// Rules TXT-P1..TXT-P4: on-disk index survives Close/Open with its mark; a
// different field list is refused; Reset clears docs and mark.
func TestOnDiskReopenAndMark(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "text")
	x, err := Open(dir, []string{"title", "body"})
	require.NoError(t, err)
	m, err := x.Mark()
	require.NoError(t, err)
	require.Nil(t, m)
	require.NoError(t, x.ApplyMarked([]Op{up("1", "title", "persisted words")}, []byte("seq-7")))
	require.NoError(t, x.Close())

	x, err = Open(dir, []string{"title", "body"})
	require.NoError(t, err)
	m, err = x.Mark()
	require.NoError(t, err)
	require.Equal(t, []byte("seq-7"), m)
	h, err := x.Search("persisted", nil, 10, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"1"}, pks(h))

	require.NoError(t, x.Reset())
	n, err := x.Count()
	require.NoError(t, err)
	require.Zero(t, n)
	m, err = x.Mark()
	require.NoError(t, err)
	require.Nil(t, m)
	require.NoError(t, x.Close())

	_, err = Open(dir, []string{"body", "title"})
	require.ErrorIs(t, err, ErrFieldsMismatch)
	require.NoError(t, Destroy(dir))
	x, err = Open(dir, []string{"body", "title"})
	require.NoError(t, err)
	require.NoError(t, x.Close())
}

// Randomized model test: after a random sequence of batches, every single
// word query returns exactly the PKs whose current text contains the word.
func TestRandomizedAgainstModel(t *testing.T) {
	forEachEngine(t, func(t *testing.T, open opener) {
		s := seed(t)
		r := rand.New(rand.NewSource(s))
		vocab := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"}
		x := open(t, "a", "b")
		model := map[string]map[string]string{}
		for round := 0; round < 30; round++ {
			var ops []Op
			for i := 0; i < 1+r.Intn(20); i++ {
				pk := "k" + strconv.Itoa(r.Intn(40))
				if r.Intn(4) == 0 {
					ops = append(ops, Op{PK: pk, Delete: true})
					delete(model, pk)
					continue
				}
				f := map[string]string{}
				for _, name := range []string{"a", "b"} {
					if r.Intn(3) == 0 {
						continue
					}
					var words []string
					for w := 0; w < 1+r.Intn(4); w++ {
						words = append(words, vocab[r.Intn(len(vocab))])
					}
					f[name] = strings.Join(words, " ")
				}
				ops = append(ops, Op{PK: pk, Fields: f})
				model[pk] = f
			}
			require.NoError(t, x.Apply(ops), "seed %d round %d", s, round)
		}
		n, err := x.Count()
		require.NoError(t, err)
		require.EqualValues(t, len(model), n, "seed %d", s)
		for _, w := range vocab {
			for _, fields := range [][]string{nil, {"a"}, {"b"}} {
				var want []string
				for pk, f := range model {
					names := fields
					if names == nil {
						names = []string{"a", "b"}
					}
					for _, name := range names {
						if strings.Contains(" "+f[name]+" ", " "+w+" ") {
							want = append(want, pk)
							break
						}
					}
				}
				sort.Strings(want)
				h, err := x.Search(w, fields, 1000, nil)
				require.NoError(t, err)
				got := pks(h)
				sort.Strings(got)
				if len(want) == 0 {
					want = []string{}
				}
				if len(got) == 0 {
					got = []string{}
				}
				require.Equal(t, want, got, "seed %d word %s fields %v", s, w, fields)
			}
		}
	})
}

// An existing empty directory (e.g. created by the caller) is a new index.
func TestOpenExistingEmptyDir(t *testing.T) {
	dir := t.TempDir()
	x, err := Open(dir, []string{"t"})
	require.NoError(t, err)
	require.NoError(t, x.Apply([]Op{up("1", "t", "word")}))
	require.NoError(t, x.Close())
	x, err = Open(dir, []string{"t"})
	require.NoError(t, err)
	n, err := x.Count()
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	require.NoError(t, x.Close())
}

func TestDestroyEmpty(t *testing.T) {
	require.NoError(t, Destroy(""))
	var target error = ErrFieldsMismatch
	require.True(t, errors.Is(fmt.Errorf("x: %w", target), ErrFieldsMismatch))
}

// Rule TXT-P5: a scratch index matches exactly what an in-memory one matches
// after the same ops applied in many small batches,
// while scorch merges its segments: the segment count falls well below the
// number of batches. Seeded.
func TestScratchMatchesMemoryAndMerges(t *testing.T) {
	s := seed(t)
	r := rand.New(rand.NewSource(s))
	vocab := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"}
	mem := mustOpen(t, "", "a", "b")
	scr, err := OpenScratch(t.TempDir(), []string{"a", "b"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = scr.Close() })
	const batches = 200
	for round := 0; round < batches; round++ {
		var ops []Op
		for i := 0; i < 1+r.Intn(10); i++ {
			pk := "k" + strconv.Itoa(r.Intn(300))
			if r.Intn(5) == 0 {
				ops = append(ops, Op{PK: pk, Delete: true})
				continue
			}
			f := map[string]string{}
			for _, name := range []string{"a", "b"} {
				var words []string
				for w := 0; w < 1+r.Intn(5); w++ {
					words = append(words, vocab[r.Intn(len(vocab))])
				}
				f[name] = strings.Join(words, " ")
			}
			ops = append(ops, Op{PK: pk, Fields: f})
		}
		require.NoError(t, mem.Apply(ops), "seed %d round %d", s, round)
		require.NoError(t, scr.Apply(ops), "seed %d round %d", s, round)
	}
	nm, err := mem.Count()
	require.NoError(t, err)
	ns, err := scr.Count()
	require.NoError(t, err)
	require.Equal(t, nm, ns, "seed %d", s)
	// Same matches. (Not the same scores: bleve sums term statistics over
	// segments, so BM25's average field length depends on the segment
	// layout, TXT-S1.)
	for _, q := range append(vocab, "alpha bravo", "golf india juliet") {
		hm, err := mem.Search(q, nil, 1000, nil)
		require.NoError(t, err)
		hs, err := scr.Search(q, nil, 1000, nil)
		require.NoError(t, err)
		want, got := pks(hm), pks(hs)
		sort.Strings(want)
		sort.Strings(got)
		require.Equal(t, want, got, "seed %d query %q", s, q)
	}
	segs, err := mem.Segments()
	require.NoError(t, err)
	// (Fewer than one per batch: segments whose documents are all replaced
	// are dropped.)
	require.Greater(t, segs, batches/2, "an in-memory index keeps about one segment per batch")
	// Merging runs in the background; this waits for it to happen at all
	// (the bound is not a performance assertion: a broken merger never
	// gets there).
	for i := 0; ; i++ {
		segs, err = scr.Segments()
		require.NoError(t, err)
		if segs <= batches/4 {
			break
		}
		if i == 6000 {
			t.Fatalf("scratch index still has %d segments after %d batches: scorch is not merging", segs, batches)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Rule TXT-P5: Close removes the scratch directory; OpenScratch removes the
// scratch directories of processes that are gone and keeps those of live
// ones.
func TestScratchDirectories(t *testing.T) {
	parent := t.TempDir()
	orphan := filepath.Join(parent, scratchPrefix+"1073741824-123") // above any pid_max
	live := filepath.Join(parent, scratchPrefix+strconv.Itoa(os.Getpid())+"-456")
	other := filepath.Join(parent, "unrelated")
	for _, d := range []string{orphan, live, other} {
		require.NoError(t, os.MkdirAll(filepath.Join(d, "x"), 0o700))
	}
	x, err := OpenScratch(parent, []string{"a"})
	require.NoError(t, err)
	require.NoError(t, x.Apply([]Op{up("1", "a", "hello")}))
	h, err := x.Search("hello", nil, 10, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"1"}, pks(h))
	_, err = os.Stat(orphan)
	require.True(t, os.IsNotExist(err), "orphan of a dead process not removed: %v", err)
	for _, d := range []string{live, other, x.dir} {
		_, err = os.Stat(d)
		require.NoError(t, err, "%s must stay while its owner lives", d)
	}
	require.NoError(t, x.Close())
	_, err = os.Stat(x.dir)
	require.True(t, os.IsNotExist(err), "Close left %s: %v", x.dir, err)
}

// Rule TXT-P6: documents carry only the configured fields (and bleve's _id),
// not the mapping's unused "_all" composite; what they index is what the
// mapping indexes for those fields (TXT-S1 scores are checked by
// TestBM25ScoreMatchesFormula).
func TestDocumentsCarryOnlyConfiguredFields(t *testing.T) {
	x := mustOpen(t, "", "title", "body.text")
	require.NoError(t, x.Apply([]Op{up("1", "title", "hello world", "body.text", "more words"), up("2", "title", "x")}))
	names, err := x.idx.Fields()
	require.NoError(t, err)
	sort.Strings(names)
	require.Equal(t, []string{"_id", "f0", "f1"}, names)
}

// opener opens an empty index of one engine for a test.
type opener func(t *testing.T, fields ...string) Engine

// forEachEngine runs a rule's test against both engines (TXT-M1: Mem obeys
// every TXT-S and TXT-A rule Index does).
func forEachEngine(t *testing.T, f func(t *testing.T, open opener)) {
	for _, name := range []string{EngineBleve, EngineMem} {
		t.Run(name, func(t *testing.T) {
			f(t, func(t *testing.T, fields ...string) Engine {
				t.Helper()
				var x Engine
				var err error
				if name == EngineBleve {
					x, err = Open("", fields)
				} else {
					x, err = OpenEngine(name, "", fields)
				}
				require.NoError(t, err)
				t.Cleanup(func() { _ = x.Close() })
				return x
			})
		})
	}
}
