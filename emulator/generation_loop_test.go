package emulator

import (
	"fmt"
	"math/rand"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
)

// loopEvent is one change of the source table, in commit-ts order: rows
// written (every row matches the searches), a row deleted, or the table
// truncated.
type loopEvent struct {
	ts       uint64
	pks      []string
	del      string
	truncate bool
}

// loopHistory is the table as a snapshot reader would see it.
type loopHistory struct {
	mu     sync.Mutex
	events []loopEvent
}

func (h *loopHistory) add(ev loopEvent) {
	h.mu.Lock()
	h.events = append(h.events, ev)
	h.mu.Unlock()
}

// snapshotsBetween returns the sets of keys a snapshot read sees at every ts
// in [lo, hi] (one per distinct state).
func (h *loopHistory) snapshotsBetween(lo, hi uint64) []map[string]bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	cur := map[string]bool{}
	apply := func(ev loopEvent) {
		if ev.truncate {
			cur = map[string]bool{}
		}
		for _, pk := range ev.pks {
			cur[pk] = true
		}
		if ev.del != "" {
			delete(cur, ev.del)
		}
	}
	i := 0
	for ; i < len(h.events) && h.events[i].ts <= lo; i++ {
		apply(h.events[i])
	}
	out := []map[string]bool{copySet(cur)}
	for ; i < len(h.events) && h.events[i].ts <= hi; i++ {
		apply(h.events[i])
		out = append(out, copySet(cur))
	}
	return out
}

func copySet(m map[string]bool) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

func loopDef(extra ...*apiv1.Field) *apiv1.CollectionDefinition {
	def := &apiv1.CollectionDefinition{
		Name: "prods",
		Fields: []*apiv1.Field{
			{Name: "id", Type: apiv1.FieldType_FIELD_TYPE_INT, Role: apiv1.FieldRole_FIELD_ROLE_PRIMARY_KEY},
			{Name: "title", Type: apiv1.FieldType_FIELD_TYPE_STRING, Role: apiv1.FieldRole_FIELD_ROLE_TEXT},
			{Name: "tag", Type: apiv1.FieldType_FIELD_TYPE_STRING, Role: apiv1.FieldRole_FIELD_ROLE_KEYWORD},
			{Name: "emb", Type: apiv1.FieldType_FIELD_TYPE_VECTOR, Role: apiv1.FieldRole_FIELD_ROLE_VECTOR, VectorDim: 2},
		},
		PrimaryKey:       []string{"id"},
		SourcePartitions: []string{"table:500"},
		MetadataAux:      true,
	}
	def.Fields = append(def.Fields, extra...)
	return def
}

// loopWriter feeds one partition and changes the schema now and then: add
// a column (ADDITIVE; as a TEXT column it rebuilds the text index), drop it
// and change its type (REBUILD_IN_PLACE), truncate (REBUILD_FULL).
type loopWriter struct {
	t      *testing.T
	e      *Emulator
	rng    *rand.Rand
	hist   *loopHistory
	w      atomic.Uint64 // ts of the newest event that may be visible
	ts     uint64
	seq    uint64
	lin    *apiv1.Lineage
	extra  *apiv1.Field // the column added and dropped, nil when absent
	nextID int
	live   []int
	ddls   map[string]int
	// deletes: some mutations delete a live row (searchDuringRebuilds then
	// checks the weaker bounds a delete allows, see there).
	deletes bool
	deleted int
}

func (lw *loopWriter) ddl(extra *apiv1.Field, policy apiv1.SchemaUpdatePolicy, truncate bool) error {
	lw.ts++
	var fs []*apiv1.Field
	if extra != nil {
		fs = append(fs, extra)
	}
	lw.hist.add(loopEvent{ts: lw.ts, truncate: truncate})
	lw.w.Store(lw.ts)
	resp, err := lw.e.PutCollectionSchema(bg, changeReq(loopDef(fs...), lw.lin, lw.ts, policy))
	if err != nil {
		return fmt.Errorf("%v at ts %d: %w", policy, lw.ts, err)
	}
	lw.lin, lw.extra = resp.GetLineage(), extra
	if truncate {
		lw.live = nil
	}
	lw.ddls[policy.String()]++
	return nil
}

func (lw *loopWriter) step() error {
	if lw.rng.Intn(12) == 0 {
		inPlace := apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_IN_PLACE
		switch {
		case lw.rng.Intn(4) == 0:
			return lw.ddl(lw.extra, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_FULL, true)
		case lw.extra == nil && lw.rng.Intn(2) == 0:
			return lw.ddl(&apiv1.Field{Name: "c", Type: apiv1.FieldType_FIELD_TYPE_INT, Role: apiv1.FieldRole_FIELD_ROLE_STORED_ONLY}, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_ADDITIVE, false)
		case lw.extra == nil:
			return lw.ddl(&apiv1.Field{Name: "c", Type: apiv1.FieldType_FIELD_TYPE_STRING, Role: apiv1.FieldRole_FIELD_ROLE_TEXT}, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_ADDITIVE, false)
		case lw.rng.Intn(2) == 0:
			return lw.ddl(nil, inPlace, false)
		case lw.extra.GetType() == apiv1.FieldType_FIELD_TYPE_INT:
			return lw.ddl(&apiv1.Field{Name: "c", Type: apiv1.FieldType_FIELD_TYPE_STRING, Role: apiv1.FieldRole_FIELD_ROLE_STORED_ONLY}, inPlace, false)
		default:
			return lw.ddl(&apiv1.Field{Name: "c", Type: apiv1.FieldType_FIELD_TYPE_INT, Role: apiv1.FieldRole_FIELD_ROLE_STORED_ONLY}, inPlace, false)
		}
	}
	n := 1 + lw.rng.Intn(20)
	b := &apiv1.MutationBatch{SourcePartition: "table:500", SourceEpoch: 1, FirstSeq: lw.seq + 1, SchemaGenerationToken: lw.lin.GetSchemaGenerationToken()}
	for i := 0; i < n; i++ {
		lw.ts++
		lw.seq++
		if lw.deletes && len(lw.live) > 1 && lw.rng.Intn(5) == 0 {
			j := lw.rng.Intn(len(lw.live))
			pk := fmt.Sprint(lw.live[j])
			lw.live[j] = lw.live[len(lw.live)-1]
			lw.live = lw.live[:len(lw.live)-1]
			b.Mutations = append(b.Mutations, &apiv1.Mutation{Seq: lw.seq, CommitTs: lw.ts, Kind: apiv1.MutationKind_MUTATION_KIND_DELETE, PrimaryKey: pk})
			lw.hist.add(loopEvent{ts: lw.ts, del: pk})
			lw.deleted++
			continue
		}
		id := lw.nextID
		if len(lw.live) > 0 && (len(lw.live) > 1500 || lw.rng.Intn(4) == 0) {
			id = lw.live[lw.rng.Intn(len(lw.live))] // an update: still matches
		} else {
			lw.nextID++
			lw.live = append(lw.live, id)
		}
		f := map[string]*apiv1.Value{
			"id":    val(id),
			"title": val(fmt.Sprintf("wireless speaker w%d", lw.rng.Intn(50))),
			"tag":   val(fmt.Sprint("t", id%7)),
			"emb":   val([]float32{1 + lw.rng.Float32(), lw.rng.Float32()}),
		}
		if x := lw.extra; x != nil {
			if x.GetType() == apiv1.FieldType_FIELD_TYPE_INT {
				f["c"] = val(id)
			} else {
				f["c"] = val(fmt.Sprint("c", id))
			}
		}
		b.Mutations = append(b.Mutations, &apiv1.Mutation{Seq: lw.seq, CommitTs: lw.ts, Kind: apiv1.MutationKind_MUTATION_KIND_UPSERT, PrimaryKey: fmt.Sprint(id), Fields: f})
		// One event per mutation: the vector index applies a batch row by
		// row in ingest order, so a search may see a prefix of a batch
		// (E70: newer mutations may be visible).
		lw.hist.add(loopEvent{ts: lw.ts, pks: []string{fmt.Sprint(id)}})
	}
	lw.w.Store(lw.ts)
	if _, err := lw.e.Ingest(bg, b); err != nil {
		return err
	}
	_, err := lw.e.AdvancePartition(bg, &apiv1.PartitionProgress{SourcePartition: "table:500", SourceEpoch: 1, ResolvedTs: lw.ts})
	return err
}

type loopAnswer struct {
	readTs, w, total uint64
	keys             []string
	kind             string
}

// E55, E56, E70: searches while the schema changes again and again. Every
// answer holds exactly the documents a snapshot read of the table sees at
// some ts between its read_ts and the newest write that may be visible
// (insert-only table, so a partly built index or a mix of generations
// cannot pass); read_ts and safe_ts never decrease over 1,000 reads.
func TestSearchDuringRepeatedRebuildsE55(t *testing.T) {
	base := testSeed(t)
	seeds := 2
	if testing.Short() {
		seeds = 1
	}
	for i := 0; i < seeds; i++ {
		seed := base + int64(i)
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { searchDuringRebuilds(t, seed, false) })
	}
}

// E55, E56, E70 with deletes: the same loop where one mutation in five
// deletes a live row. A search may show mutations newer than its read_ts
// (E70), and the text index, the vector index and the document store each
// reflect their own point at or after it, so an answer is not always one
// snapshot: the check is that it holds every document present throughout
// [read_ts, newest write] and none present at no ts of it (a document
// deleted at or before read_ts, or one a rebuild brought back, fails), and
// that a text total is the size of one snapshot in that range (the index
// counts one state of itself, TXT-S8).
func TestSearchDuringRebuildsWithDeletesE55(t *testing.T) {
	base := testSeed(t)
	seeds := 2
	if testing.Short() {
		seeds = 1
	}
	for i := 0; i < seeds; i++ {
		seed := base + int64(i)
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { searchDuringRebuilds(t, seed, true) })
	}
}

func searchDuringRebuilds(t *testing.T, seed int64, deletes bool) {
	e := openMem(t, Options{VectorHNSWThreshold: -1})
	lw := &loopWriter{t: t, e: e, rng: rand.New(rand.NewSource(seed)), hist: &loopHistory{}, ts: 10, nextID: 1, ddls: map[string]int{}, deletes: deletes}
	lw.lin = mustCreate(t, e, loopDef(), lw.ts)
	for i := 0; i < 20; i++ {
		if err := lw.step(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
	e.WaitIndexed()

	stop := make(chan struct{})
	werr := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				werr <- nil
				return
			default:
			}
			if err := lw.step(); err != nil {
				werr <- err
				return
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()

	const reads = 1000
	var answers []loopAnswer
	var lastRead, lastSafe uint64
	duringRebuild := 0 // reads whose status then said rebuilding (E58)
	text := &apiv1.SearchRequest{Collection: "prods", Text: &apiv1.TextQuery{Query: "wireless"}, Limit: MaxSearchLimit, KeysOnly: true}
	vec := &apiv1.SearchRequest{Collection: "prods", Vector: &apiv1.VectorQuery{Field: "emb", Vector: []float32{1, 0}}, Limit: MaxSearchLimit, KeysOnly: true}
	for i := 0; i < reads; i++ {
		req, kind := text, "text"
		if i%3 == 2 {
			req, kind = vec, "vector"
		}
		r, err := e.Search(bg, req)
		if err != nil {
			close(stop)
			t.Fatalf("seed %d: read %d: %v", seed, i, err)
		}
		w := lw.w.Load()
		// rule: E56 — neither read_ts nor safe_ts ever decreases.
		if r.GetReadTs() < lastRead || r.GetReadTs() == 0 {
			close(stop)
			t.Fatalf("seed %d: read %d: read_ts %d after %d", seed, i, r.GetReadTs(), lastRead)
		}
		lastRead = r.GetReadTs()
		st := status(t, e, "prods")
		if st.GetSafeTs() < lastSafe {
			close(stop)
			t.Fatalf("seed %d: read %d: safe_ts %d after %d", seed, i, st.GetSafeTs(), lastSafe)
		}
		lastSafe = st.GetSafeTs()
		if st.GetRebuild() != nil {
			duringRebuild++
		}
		// A text-only total counts the index's own state, which may still
		// hold a document the store has deleted since read_ts (E76).
		if r.GetTotal() != uint64(len(r.GetHits())) && !(deletes && kind == "text" && r.GetTotal() > uint64(len(r.GetHits()))) {
			close(stop)
			t.Fatalf("seed %d: read %d: total %d with %d hits under the limit", seed, i, r.GetTotal(), len(r.GetHits()))
		}
		answers = append(answers, loopAnswer{readTs: r.GetReadTs(), w: w, total: r.GetTotal(), keys: hitKeys(r), kind: kind})
	}
	close(stop)
	if err := <-werr; err != nil {
		t.Fatalf("seed %d: writer: %v", seed, err)
	}
	if lw.ddls[apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_FULL.String()] == 0 || lw.ddls[apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_IN_PLACE.String()] == 0 {
		t.Logf("seed %d: few schema changes: %v", seed, lw.ddls)
	}

	// rule: E55 — each answer is one generation's documents at one ts.
	empty := 0
	for i, a := range answers {
		snaps := lw.hist.snapshotsBetween(a.readTs, a.w)
		ok := false
		if deletes {
			ok = withinSnapshots(snaps, a.keys)
			if ok && a.kind == "text" {
				ok = false
				for _, s := range snaps {
					if uint64(len(s)) == a.total {
						ok = true
						break
					}
				}
			}
		}
		for _, s := range snaps {
			if ok || deletes {
				break
			}
			if sameSet(s, a.keys) {
				ok = true
			}
		}
		if !ok {
			sizes := make([]int, len(snaps))
			for j, s := range snaps {
				sizes[j] = len(s)
			}
			t.Fatalf("seed %d: %s answer %d at read_ts %d (newest write %d) has %d keys; snapshots in between have %v",
				seed, a.kind, i, a.readTs, a.w, len(a.keys), sizes)
		}
		if len(a.keys) == 0 {
			empty++
		}
	}
	t.Logf("seed %d: %d answers (%d empty, each right after a truncate; %d read while a rebuild ran), %d deletes, schema changes %v", seed, len(answers), empty, duringRebuild, lw.deleted, lw.ddls)
}

// withinSnapshots reports whether keys (no duplicates) hold every key of
// all the snapshots and only keys of at least one of them.
func withinSnapshots(snaps []map[string]bool, keys []string) bool {
	got := make(map[string]bool, len(keys))
	for _, k := range keys {
		if got[k] {
			return false
		}
		got[k] = true
		in := false
		for _, s := range snaps {
			if s[k] {
				in = true
				break
			}
		}
		if !in {
			return false
		}
	}
	for k := range snaps[0] {
		every := true
		for _, s := range snaps[1:] {
			if !s[k] {
				every = false
				break
			}
		}
		if every && !got[k] {
			return false
		}
	}
	return true
}

func sameSet(m map[string]bool, keys []string) bool {
	if len(m) != len(keys) {
		return false
	}
	ks := append([]string(nil), keys...)
	sort.Strings(ks)
	for i, k := range ks {
		if !m[k] || (i > 0 && ks[i-1] == k) {
			return false
		}
	}
	return true
}
