package schemastore

import (
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"reflect"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
)

var seedFlag = flag.Int64("schemastore.seed", 0, "seed for randomized schemastore tests (0: SCHEMASTORE_SEED or time)")

func testSeed(t *testing.T) int64 {
	seed := *seedFlag
	if seed == 0 {
		if s, err := strconv.ParseInt(os.Getenv("SCHEMASTORE_SEED"), 10, 64); err == nil {
			seed = s
		}
	}
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (rerun with -schemastore.seed=%d)", seed, seed)
	return seed
}

type genJob struct {
	ts  uint64
	job *model.Job
}

// genJobs produces a valid random DDL sequence over schema 10: creates,
// add column, drop, truncate, add/drop partition, rename; some jobs share a
// commit ts (then schema versions order them).
func genJobs(r *rand.Rand, n int) []genJob {
	type live struct {
		cols  int
		parts []int64
		name  string
	}
	tables := map[int64]*live{20: {cols: 2, name: "t"}, 30: {cols: 1, parts: []int64{31, 32, 33}, name: "pt"}}
	nextID := int64(1000)
	newID := func() int64 { nextID++; return nextID }
	build := func(id int64, l *live) *model.TableInfo {
		ti := tbl(id, l.name, l.cols)
		if l.parts != nil {
			withParts(ti, l.parts...)
		}
		return ti
	}
	ids := func() []int64 {
		var out []int64
		for id := range tables {
			out = append(out, id)
		}
		sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
		return out
	}
	var out []genJob
	ts := uint64(snapTs + 1)
	ver := int64(1)
	for i := 0; i < n; i++ {
		if r.Intn(4) != 0 {
			ts += uint64(1 + r.Intn(20))
		}
		ver++
		jobID := int64(i + 1)
		all := ids()
		var j *model.Job
		switch op := r.Intn(8); {
		case op == 0 || len(all) == 0:
			id := newID()
			l := &live{cols: r.Intn(3), name: fmt.Sprintf("n%d", id)}
			if r.Intn(3) == 0 {
				l.parts = []int64{newID(), newID()}
			}
			tables[id] = l
			j = withTable(job(jobID, model.ActionCreateTable, 10, id, ver), build(id, l))
		case op == 1:
			id := all[r.Intn(len(all))]
			j = withTable(job(jobID, model.ActionDropTable, 10, id, ver), build(id, tables[id]))
			delete(tables, id)
		case op == 2:
			id := all[r.Intn(len(all))]
			l := tables[id]
			delete(tables, id)
			nid := newID()
			if l.parts != nil {
				l.parts = []int64{newID(), newID()}
			}
			tables[nid] = l
			j = withTable(job(jobID, model.ActionTruncateTable, 10, id, ver), build(nid, l))
		case op == 3:
			id := all[r.Intn(len(all))]
			l := tables[id]
			if l.parts == nil {
				l.cols++
				j = withTable(job(jobID, model.ActionAddColumn, 10, id, ver), build(id, l))
			} else if len(l.parts) > 1 && r.Intn(2) == 0 {
				l.parts = l.parts[1:]
				j = withTable(job(jobID, model.ActionDropTablePartition, 10, id, ver), build(id, l))
			} else {
				l.parts = append(append([]int64(nil), l.parts...), newID())
				j = withTable(job(jobID, model.ActionAddTablePartition, 10, id, ver), build(id, l))
			}
		case op == 4:
			id := all[r.Intn(len(all))]
			tables[id].name = fmt.Sprintf("r%d", jobID)
			j = withTable(job(jobID, model.ActionRenameTable, 10, id, ver), build(id, tables[id]))
		default:
			id := all[r.Intn(len(all))]
			tables[id].cols++
			j = withTable(job(jobID, model.ActionAddColumn, 10, id, ver), build(id, tables[id]))
		}
		out = append(out, genJob{ts: ts, job: j})
	}
	return out
}

// lookupSummary is a comparable answer of GetTableInfo.
func lookupSummary(s *Store, id int64, ts uint64) string {
	ti, err := s.GetTableInfo(id, ts)
	if err != nil {
		var le *LookupError
		if errors.As(err, &le) {
			return le.Kind.Error()
		}
		return err.Error()
	}
	return fmt.Sprintf("%d %s %s %v", ti.ID, ti.Name.O, colNames(ti), ti.PhysicalIDs())
}

// TestRandomDeliveryMatchesInOrder: whatever the delivery order within the
// resolved-ts contract, duplicates, re-scans of applied jobs and restarts,
// the store ends with exactly the history of in-order delivery.
func TestRandomDeliveryMatchesInOrder(t *testing.T) {
	seed := testSeed(t)
	for round := 0; round < 3; round++ {
		r := rand.New(rand.NewSource(seed + int64(round)))
		jobs := genJobs(r, 40)
		ref := baseEnv(t)
		for i, g := range jobs {
			ref.deliver(g.ts, g.job)
			if i == len(jobs)-1 || jobs[i+1].ts != g.ts {
				ref.resolve(g.ts)
			}
		}
		last := jobs[len(jobs)-1].ts

		sub := baseEnv(t)
		sub.cfg.Snapshot = nil
		delivered := 0
		for delivered < len(jobs) {
			// resolve point: somewhere ahead
			target := jobs[delivered+r.Intn(len(jobs)-delivered)].ts
			var batch []genJob
			for delivered < len(jobs) && jobs[delivered].ts <= target {
				batch = append(batch, jobs[delivered])
				delivered++
			}
			// jobs just above the target may arrive early
			for k := delivered; k < len(jobs) && k < delivered+2; k++ {
				if r.Intn(2) == 0 {
					batch = append(batch, jobs[k])
				}
			}
			// duplicates and re-scans of applied jobs
			for k := 0; k < 3 && delivered > 0; k++ {
				batch = append(batch, jobs[r.Intn(delivered)])
			}
			r.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
			for _, g := range batch {
				sub.deliver(g.ts, g.job)
			}
			sub.resolve(target)
			if r.Intn(5) == 0 {
				sub.reopen()
			}
		}
		sub.resolve(last)

		if a, b := eventSummaries(ref.events(snapTs)), eventSummaries(sub.events(snapTs)); !reflect.DeepEqual(a, b) {
			t.Fatalf("seed %d round %d: events differ\nin order: %+v\nrandom:   %+v", seed, round, a, b)
		}
		ids := map[int64]bool{}
		for id := range ref.store.h.physical {
			ids[id] = true
		}
		for id := range ids {
			for _, g := range jobs {
				for _, ts := range []uint64{g.ts - 1, g.ts} {
					if a, b := lookupSummary(ref.store, id, ts), lookupSummary(sub.store, id, ts); a != b {
						t.Fatalf("seed %d round %d: table %d at %d: in order %q, random %q", seed, round, id, ts, a, b)
					}
				}
			}
		}
	}
}
