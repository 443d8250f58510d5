package emulator

import (
	"flag"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"testing"
	"time"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
)

var modelSeed = flag.Int64("emulator.seed", 0, "seed for the randomized model test (0: SFEMU_SEED env or time-based)")

func testSeed(t *testing.T) int64 {
	seed := *modelSeed
	if seed == 0 {
		if s := os.Getenv("SFEMU_SEED"); s != "" {
			seed, _ = strconv.ParseInt(s, 10, 64)
		}
	}
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("reproduce with: go test ./emulator -run %s -emulator.seed=%d", t.Name(), seed)
		}
	})
	return seed
}

type srcMut struct {
	ts   uint64
	key  int
	del  bool
	body string
}

// adapter simulates one partition's feeder: epoch, next seq, what it has
// sent in this epoch, and the resume point after a restart.
type adapter struct {
	part    string
	muts    []srcMut // canonical order (commit_ts ascending)
	epoch   uint64
	nextSeq uint64
	cursor  int // next index into muts
	sent    []*apiv1.MutationBatch
}

func (a *adapter) build(from, n int, seq uint64, epoch uint64, tok string) *apiv1.MutationBatch {
	b := &apiv1.MutationBatch{SourcePartition: a.part, SourceEpoch: epoch, FirstSeq: seq, SchemaGenerationToken: tok}
	for i := 0; i < n; i++ {
		m := a.muts[from+i]
		if m.del {
			b.Mutations = append(b.Mutations, del(seq+uint64(i), m.ts, m.key))
		} else {
			b.Mutations = append(b.Mutations, docUpsert(seq+uint64(i), m.ts, m.key, m.body))
		}
	}
	return b
}

// TestRandomizedModel feeds batches with replays, gaps, overlaps, epoch
// changes (adapter restarts re-delivering from the stored resume point),
// stale epochs and emulator restarts, and compares the final documents with
// a last-writer-wins reference (E33, E34, E38, E41, E54, E60).
func TestRandomizedModel(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	dir := t.TempDir()
	e, err := Open(dir, Options{TombstoneRetention: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.Close() }()
	parts := []string{"table:1", "table:2", "table:3"}
	tok := mustCreate(t, e, docDef("docs", parts...), 1).GetSchemaGenerationToken()

	// Source streams: globally unique commit ts, keys shared by partitions.
	const keys = 40
	var ts uint64 = 10
	adapters := make([]*adapter, len(parts))
	for i, p := range parts {
		adapters[i] = &adapter{part: p, epoch: 1, nextSeq: 1}
	}
	for i := 0; i < 600; i++ {
		ts += uint64(1 + rng.Intn(3))
		a := adapters[rng.Intn(len(adapters))]
		a.muts = append(a.muts, srcMut{ts: ts, key: rng.Intn(keys), del: rng.Intn(4) == 0, body: fmt.Sprintf("b%d", ts)})
	}
	// Reference: last writer by commit ts.
	ref := map[int]srcMut{}
	for _, a := range adapters {
		for _, m := range a.muts {
			if cur, ok := ref[m.key]; !ok || m.ts > cur.ts {
				ref[m.key] = m
			}
		}
	}

	expectReason := func(step int, err error, r Reason) {
		t.Helper()
		if ReasonOf(err) != r {
			t.Fatalf("step %d: want %s, got %v", step, r, err)
		}
	}
	restarts := 0
	stored := func(p string) *apiv1.PartitionState {
		prog, _ := e.GetProgress(bg, &apiv1.GetProgressRequest{SourcePartitions: []string{p}})
		return prog.GetPartitions()[0]
	}
	for step := 0; step < 3000; step++ {
		a := adapters[rng.Intn(len(adapters))]
		remaining := len(a.muts) - a.cursor
		switch op := rng.Intn(100); {
		case op < 50 && remaining > 0: // next batch
			n := 1 + rng.Intn(min(remaining, 8))
			b := a.build(a.cursor, n, a.nextSeq, a.epoch, tok)
			r, err := e.Ingest(bg, b)
			if err != nil || r.GetOutcome() != apiv1.IngestOutcome_INGEST_OUTCOME_APPLIED {
				t.Fatalf("step %d: next batch: %v %v", step, r, err)
			}
			a.sent = append(a.sent, b)
			a.cursor += n
			a.nextSeq += uint64(n)
		case op < 60 && len(a.sent) > 0: // replay
			b := a.sent[rng.Intn(len(a.sent))]
			r, err := e.Ingest(bg, b)
			if err != nil || r.GetOutcome() != apiv1.IngestOutcome_INGEST_OUTCOME_REPLAY_NOOP {
				t.Fatalf("step %d: replay: %v %v", step, r, err)
			}
		case op < 66 && remaining > 2: // out of order: skip ahead
			b := a.build(a.cursor+1, 1, a.nextSeq+1, a.epoch, tok)
			_, err := e.Ingest(bg, b)
			expectReason(step, err, contract.ReasonSeqGap)
		case op < 70 && remaining > 0 && a.nextSeq > 1: // overlap
			b := a.build(a.cursor-1, 2, a.nextSeq-1, a.epoch, tok)
			_, err := e.Ingest(bg, b)
			expectReason(step, err, contract.ReasonSeqOverlap)
		case op < 73 && remaining > 0 && stored(a.part).GetSourceEpoch() > 1: // stale epoch
			b := a.build(a.cursor, 1, 1, stored(a.part).GetSourceEpoch()-1, tok)
			_, err := e.Ingest(bg, b)
			expectReason(step, err, contract.ReasonEpochRegression)
		case op < 85 && a.cursor > 0: // resolved ts up to what was sent
			resolved := a.muts[a.cursor-1].ts
			if a.cursor < len(a.muts) && rng.Intn(2) == 0 {
				resolved = a.muts[a.cursor].ts - 1
			}
			prog, _ := e.GetProgress(bg, &apiv1.GetProgressRequest{SourcePartitions: []string{a.part}})
			if resolved < prog.GetPartitions()[0].GetResolvedTs() {
				_, err := e.AdvancePartition(bg, &apiv1.PartitionProgress{SourcePartition: a.part, SourceEpoch: a.epoch, ResolvedTs: resolved})
				expectReason(step, err, contract.ReasonProgressRegression)
				continue
			}
			mustAdvance(t, e, a.part, a.epoch, resolved)
		case op < 93: // adapter restart: new epoch, resume from stored progress
			prog, _ := e.GetProgress(bg, &apiv1.GetProgressRequest{SourcePartitions: []string{a.part}})
			resolved := prog.GetPartitions()[0].GetResolvedTs()
			a.epoch++
			a.nextSeq = 1
			a.sent = nil
			a.cursor = 0
			for a.cursor < len(a.muts) && a.muts[a.cursor].ts <= resolved {
				a.cursor++
			}
		case op < 95 && restarts < 4: // emulator restart
			restarts++
			before := dump(t, e)
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			if e, err = Open(dir, Options{TombstoneRetention: -1}); err != nil {
				t.Fatal(err)
			}
			if after := dump(t, e); after != before {
				t.Fatalf("step %d: restart changed state", step)
			}
		}
	}
	// Drain everything and compare with the reference.
	for _, a := range adapters {
		if a.cursor < len(a.muts) {
			mustIngest(t, e, a.build(a.cursor, len(a.muts)-a.cursor, a.nextSeq, a.epoch, tok))
		}
	}
	for k := 0; k < keys; k++ {
		g, err := e.GetDocument(bg, &apiv1.GetDocumentRequest{Collection: "docs", PrimaryKey: fmt.Sprint(k)})
		if err != nil {
			t.Fatal(err)
		}
		want, touched := ref[k]
		switch {
		case !touched || want.del:
			if g.GetFound() {
				t.Fatalf("key %d: found %v, reference has it deleted/absent (%+v)", k, g.GetDocument(), want)
			}
		default:
			if !g.GetFound() || g.GetDocument().GetCommitTs() != want.ts || g.GetDocument().GetFields()["body"].GetStringValue() != want.body {
				t.Fatalf("key %d: got %v, want %+v", k, g.GetDocument(), want)
			}
		}
	}
}
