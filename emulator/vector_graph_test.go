package emulator

import (
	"fmt"
	"math"
	"math/rand"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/vector"
)

// vecRig drives the items collection with random 3-d vectors: upserts
// (new ids and replacements) and deletes, tracked in live.
type vecRig struct {
	t    *testing.T
	rng  *rand.Rand
	seq  uint64
	ts   uint64
	live map[int][]float32
}

func (r *vecRig) ingest(e *Emulator, tok string, n int) {
	var muts []*apiv1.Mutation
	for i := 0; i < n; i++ {
		r.seq++
		r.ts++
		id := 1 + r.rng.Intn(400)
		if r.rng.Intn(5) == 0 {
			muts = append(muts, del(r.seq, r.ts, id))
			delete(r.live, id)
			continue
		}
		v := []float32{float32(r.rng.NormFloat64()), float32(r.rng.NormFloat64()), float32(r.rng.NormFloat64())}
		muts = append(muts, &apiv1.Mutation{Seq: r.seq, CommitTs: r.ts, Kind: apiv1.MutationKind_MUTATION_KIND_UPSERT, PrimaryKey: fmt.Sprint(id),
			Fields: map[string]*apiv1.Value{"id": val(id), "title": val("t"), "emb": val(v)}})
		r.live[id] = v
	}
	mustIngest(r.t, e, mb("table:100", 1, tok, muts...))
	r.ts++
	mustAdvance(r.t, e, "table:100", 1, r.ts)
	e.WaitIndexed()
}

// rebuildInPlace changes items' price from FLOAT to INT with
// REBUILD_IN_PLACE (a new generation's indexes are built beside the
// serving ones, E55), waits for the swap and returns the new token.
func (r *vecRig) rebuildInPlace(e *Emulator, lin *apiv1.Lineage) string {
	r.t.Helper()
	def := itemsDef("items")
	def.Fields[3].Type = apiv1.FieldType_FIELD_TYPE_INT
	r.ts++
	resp, err := e.PutCollectionSchema(bg, changeReq(def, lin, r.ts, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_IN_PLACE))
	if err != nil {
		r.t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for status(r.t, e, "items").GetRebuild() != nil {
		if time.Now().After(deadline) {
			r.t.Fatal("rebuild did not finish")
		}
		time.Sleep(time.Millisecond)
	}
	return resp.GetLineage().GetSchemaGenerationToken()
}

// reopenVec closes e and opens its directory again (a restart, E61).
func reopenVec(t *testing.T, e *Emulator, dir string, opts Options) *Emulator {
	t.Helper()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// servingIndex is the serving generation's vector index of items.
func servingIndex(e *Emulator) *vector.Index {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.colls["items"].serving().vecFields[0].idx
}

// check compares vector searches with the index's exact scan: the whole
// ranking (every live vector) and each of a few live vectors as its own
// nearest neighbour, whatever part of them the graph covers yet.
func (r *vecRig) check(e *Emulator, seed int64, what string) {
	r.t.Helper()
	idx := servingIndex(e)
	if idx.Len() != len(r.live) {
		r.t.Fatalf("seed %d %s: index holds %d vectors, %d live", seed, what, idx.Len(), len(r.live))
	}
	for i := 0; i < 5; i++ {
		q := []float32{float32(r.rng.NormFloat64()), float32(r.rng.NormFloat64()), float32(r.rng.NormFloat64())}
		got, _ := searchKeys(r.t, e, &apiv1.SearchRequest{Collection: "items", Vector: &apiv1.VectorQuery{Field: "emb", Vector: q}, Limit: 400, KeysOnly: true})
		want, err := idx.SearchExact(q, 400, nil)
		if err != nil {
			r.t.Fatal(err)
		}
		if len(got) != len(want) {
			r.t.Fatalf("seed %d %s: %d hits, exact scan has %d (tail %d)", seed, what, len(got), len(want), idx.Tail())
		}
		for j := range want {
			if got[j] != want[j].PK {
				r.t.Fatalf("seed %d %s: rank %d is %s, exact scan has %s", seed, what, j, got[j], want[j].PK)
			}
		}
	}
	n := 0
	for id, v := range r.live {
		if n++; n > 10 {
			break
		}
		got, _ := searchKeys(r.t, e, &apiv1.SearchRequest{Collection: "items", Vector: &apiv1.VectorQuery{Field: "emb", Vector: v}, Limit: 1, KeysOnly: true})
		if len(got) != 1 || got[0] != fmt.Sprint(id) {
			r.t.Fatalf("seed %d %s: vector of %d finds %v (tail %d)", seed, what, id, got, idx.Tail())
		}
	}
}

// Rules VEC-G2, VEC-G3, VEC-G5, VEC-P1 with E55 and E61: with the graph
// on (threshold 50), vector searches answer like the exact scan while the
// graph is built in the background after the first search, through a
// REBUILD_IN_PLACE (the new generation's index is built beside the
// serving one) and after a restart (rebuilt from the documents, its graph
// built from the start because the collection had been searched).
func TestVectorGraphThroughRebuildAndRestart(t *testing.T) {
	seed := testSeed(t)
	r := &vecRig{t: t, rng: rand.New(rand.NewSource(seed)), live: map[int][]float32{}}
	dir := t.TempDir()
	opts := Options{VectorHNSWThreshold: 50}
	e, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	lin := mustCreate(t, e, itemsDef("items"), 10)
	r.ts = 10
	tok := lin.GetSchemaGenerationToken()
	r.ingest(e, tok, 300)
	if idx := servingIndex(e); idx.UsingHNSW() || idx.Tail() != idx.Len() {
		t.Fatalf("VEC-G3: graph before any search (tail %d of %d)", idx.Tail(), idx.Len())
	}
	r.check(e, seed, "first search")
	for i := 0; i < 5; i++ { // writes while the builder runs
		r.ingest(e, tok, 60)
		r.check(e, seed, fmt.Sprintf("during build %d", i))
	}
	servingIndex(e).WaitGraph()
	if idx := servingIndex(e); !idx.UsingHNSW() || idx.Tail() != 0 {
		t.Fatalf("graph not built: tail %d of %d", idx.Tail(), idx.Len())
	}
	r.check(e, seed, "built")

	tok = r.rebuildInPlace(e, lin)
	idx := servingIndex(e)
	idx.WaitGraph()
	if !idx.UsingHNSW() || idx.Tail() != 0 {
		t.Fatalf("VEC-G3: the rebuilt index of a searched collection has no graph before its first search (tail %d of %d)", idx.Tail(), idx.Len())
	}
	r.check(e, seed, "after REBUILD_IN_PLACE")
	r.ingest(e, tok, 60)
	r.check(e, seed, "writes after the rebuild")

	e = reopenVec(t, e, dir, opts)
	defer e.Close()
	// VEC-G5: items was searched before the restart, so its graph builds
	// from the start, before any search after it.
	idx = servingIndex(e)
	if !idx.Armed() {
		t.Fatal("VEC-G5: after a restart the graph of a searched collection waits for the first search")
	}
	idx.WaitGraph()
	if !idx.UsingHNSW() || idx.Tail() != 0 {
		t.Fatalf("VEC-G5: graph not built at open (tail %d of %d)", idx.Tail(), idx.Len())
	}
	r.check(e, seed, "after restart")
	r.ingest(e, tok, 60)
	servingIndex(e).WaitGraph()
	r.check(e, seed, "after restart, built")
}

// waitVectorGraphs waits until the graph of every serving vector index
// covers its vectors (VEC-G3's background build), for benchmarks that
// measure searches on a finished graph.
func waitVectorGraphs(e *Emulator) {
	var idxs []*vector.Index
	e.mu.RLock()
	for _, c := range e.colls {
		for _, vf := range c.serving().vecFields {
			idxs = append(idxs, vf.idx)
		}
	}
	e.mu.RUnlock()
	for _, x := range idxs {
		x.WaitGraph()
	}
}

// checkBrute compares vector searches through the emulator with a float64
// brute-force cosine ranking of live (independent of the index): the top
// 20 of a few random queries, rank by rank (a swap is accepted only
// between distances equal to 1e-6).
func (r *vecRig) checkBrute(e *Emulator, seed int64, what string) {
	r.t.Helper()
	dist := func(q, v []float32) float64 {
		var dp, na, nb float64
		for i := range v {
			dp += float64(v[i]) * float64(q[i])
			na += float64(v[i]) * float64(v[i])
			nb += float64(q[i]) * float64(q[i])
		}
		return 1 - dp/math.Sqrt(na*nb)
	}
	for i := 0; i < 5; i++ {
		q := []float32{float32(r.rng.NormFloat64()), float32(r.rng.NormFloat64()), float32(r.rng.NormFloat64())}
		want := make([]int, 0, len(r.live))
		for id := range r.live {
			want = append(want, id)
		}
		sort.Slice(want, func(a, b int) bool {
			da, db := dist(q, r.live[want[a]]), dist(q, r.live[want[b]])
			if da != db {
				return da < db
			}
			return fmt.Sprint(want[a]) < fmt.Sprint(want[b])
		})
		want = want[:min(20, len(want))]
		got, _ := searchKeys(r.t, e, &apiv1.SearchRequest{Collection: "items", Vector: &apiv1.VectorQuery{Field: "emb", Vector: q}, Limit: 20, KeysOnly: true})
		if len(got) != len(want) {
			r.t.Fatalf("seed %d %s: %d hits, brute force has %d", seed, what, len(got), len(want))
		}
		for j, id := range want {
			if got[j] == fmt.Sprint(id) {
				continue
			}
			var gid int
			fmt.Sscan(got[j], &gid)
			gv, ok := r.live[gid]
			if !ok || math.Abs(dist(q, gv)-dist(q, r.live[id])) > 1e-6 {
				r.t.Fatalf("seed %d %s: rank %d is %s, brute force has %d", seed, what, j, got[j], id)
			}
		}
	}
}

// Rule VEC-Q1: with a vector memory budget smaller than the index and its
// graph, the index spills once the graph build (after the first search)
// passes it, and vector searches keep equal to a brute-force reference:
// after the spill, through writes to the spilled slab, through a
// REBUILD_IN_PLACE (both generations charged to the one budget: the new
// one spills too) and after a restart. The spill is logged, and nothing
// is left in the spill directory (the files are unlinked).
func TestVectorSpillPastTheBudget(t *testing.T) {
	seed := testSeed(t)
	r := &vecRig{t: t, rng: rand.New(rand.NewSource(seed)), live: map[int][]float32{}}
	dir, spill := t.TempDir(), t.TempDir()
	var logs []string
	var logMu sync.Mutex
	opts := Options{VectorHNSWThreshold: 50, VectorMemoryBudget: 60_000, VectorSpillDir: spill, Logf: func(f string, a ...any) {
		logMu.Lock()
		logs = append(logs, fmt.Sprintf(f, a...))
		logMu.Unlock()
	}}
	e, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	lin := mustCreate(t, e, itemsDef("items"), 10)
	r.ts = 10
	tok := lin.GetSchemaGenerationToken()
	r.ingest(e, tok, 300)
	idx := servingIndex(e)
	if idx.Spilled() {
		t.Fatalf("spilled before the graph: %d bytes within a budget of %d", idx.Bytes(), opts.VectorMemoryBudget)
	}
	r.checkBrute(e, seed, "in memory")
	idx.WaitGraph()
	if !idx.Spilled() || idx.UsingHNSW() {
		t.Fatalf("VEC-Q1: the graph took the index (%d bytes) past the budget: spilled %v, graph %v", idx.Bytes(), idx.Spilled(), idx.UsingHNSW())
	}
	r.checkBrute(e, seed, "spilled")
	r.ingest(e, tok, 200)
	r.checkBrute(e, seed, "writes after the spill")

	tok = r.rebuildInPlace(e, lin)
	servingIndex(e).WaitGraph()
	if !servingIndex(e).Spilled() {
		t.Fatal("VEC-Q1: the rebuilt generation's index fit in a budget its graph passes")
	}
	r.checkBrute(e, seed, "after REBUILD_IN_PLACE")
	r.ingest(e, tok, 100)
	r.checkBrute(e, seed, "writes after the rebuild")
	e = reopenVec(t, e, dir, opts)
	defer e.Close()
	servingIndex(e).WaitGraph()
	r.checkBrute(e, seed, "after restart")
	logMu.Lock()
	spilled := 0
	for _, l := range logs {
		if strings.Contains(l, "items.emb passed the vector memory budget") {
			spilled++
		}
	}
	logMu.Unlock()
	if spilled < 2 {
		t.Fatalf("VEC-Q1: %d spills logged, want one per spilled generation: %q", spilled, logs)
	}
	if ents, _ := os.ReadDir(spill); len(ents) != 0 {
		t.Fatalf("spill directory holds %d files; spill files are unlinked", len(ents))
	}
}

// Rule VEC-G5: a restart remembers which collections were vector-searched:
// one that never was waits for its first search after a restart (VEC-G3);
// once searched, the next Open builds its graph from the start.
func TestVectorGraphBuiltAtOpenWhenSearched(t *testing.T) {
	seed := testSeed(t)
	r := &vecRig{t: t, rng: rand.New(rand.NewSource(seed)), live: map[int][]float32{}}
	dir := t.TempDir()
	opts := Options{VectorHNSWThreshold: 50}
	e, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	lin := mustCreate(t, e, itemsDef("items"), 10)
	r.ts = 10
	r.ingest(e, lin.GetSchemaGenerationToken(), 200)
	e = reopenVec(t, e, dir, opts)
	if servingIndex(e).Armed() {
		t.Fatal("VEC-G3: a never-searched collection builds its graph after a restart")
	}
	r.check(e, seed, "first search")
	e = reopenVec(t, e, dir, opts)
	defer e.Close()
	idx := servingIndex(e)
	if !idx.Armed() {
		t.Fatal("VEC-G5: the graph of a searched collection waits for a search after a restart")
	}
	idx.WaitGraph()
	if !idx.UsingHNSW() || idx.Tail() != 0 {
		t.Fatalf("VEC-G5: graph not built at open (tail %d of %d)", idx.Tail(), idx.Len())
	}
	r.check(e, seed, "after restart")
}
