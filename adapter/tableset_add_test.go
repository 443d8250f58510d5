package adapter

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/snapshot"
	"github.com/searchfabric/sfemu/verify"
)

// addRig is a snapRig (shop.items holding rows) whose adapter starts on
// another table, shop.other, and adds shop.items while running.
func newAddRig(t *testing.T, wire bool, seed int64) *snapRig {
	r := newSnapRig(t, wire, seed, snapRows(t)/4)
	r.split(t, 4)
	r.exec(t, "CREATE TABLE shop.other (id BIGINT PRIMARY KEY, v INT)")
	return r
}

var otherTables = []TableRef{{DB: "shop", Table: "other"}}

// addConfig follows shop.other without a startup snapshot; hook runs
// after each chunk of an added table's snapshot.
func (r *snapRig) addConfig(t *testing.T, log *syncWriter, hook func(snapshot.Task, int) error) Config {
	cfg := r.config(t, SnapshotConfig{Concurrency: 2, ChunkRows: 250, AfterChunk: hook})
	cfg.Snapshot.Mode = SnapshotNever
	cfg.Tables = otherTables
	cfg.Log = log
	return cfg
}

var addDoneLine = regexp.MustCompile(`snapshot of shop\.items at ts (\d+) done: (\d+) rows`)

// addedTs reads S from the adapter's log line of the finished snapshot.
func addedTs(t *testing.T, log string) (s uint64, rows int64) {
	t.Helper()
	m := addDoneLine.FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("no finished snapshot of shop.items in the log:\n%s", log)
	}
	s, _ = strconv.ParseUint(m[1], 10, 64)
	rows, _ = strconv.ParseInt(m[2], 10, 64)
	return s, rows
}

// finishBoth writes a last round and checks both tables at the final ts.
func (r *snapRig) finishBoth(t *testing.T) {
	t.Helper()
	for i := 0; i < 10; i++ {
		r.step(t)
	}
	r.exec(t, fmt.Sprintf("INSERT INTO shop.other VALUES (%d, 2)", r.rng.Int63()))
	final, err := r.up.CurrentTs(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	all := append(append([]TableRef{}, otherTables...), snapTables...)
	if err := verify.WaitSafe(r.ctx, r.emu, all, final, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	expectConsistent(t, r.ctx, r.up, r.emu, all, final)
}

// checkHandoff checks the added table's mutations: every row the table
// held at S ingested once at commit_ts S, nothing below S, nothing at S
// twice (LT6).
func checkHandoff(t *testing.T, cs *countingSink, s uint64, rowsAtS int64) {
	t.Helper()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	var atS int64
	for k, n := range cs.perKey {
		at := strings.HasSuffix(k, fmt.Sprintf("@%d", s))
		if at {
			atS++
			if n != 1 {
				t.Errorf("%s ingested %d times", k, n)
			}
		}
	}
	if atS != rowsAtS {
		t.Errorf("%d rows ingested at S=%d, the table held %d", atS, s, rowsAtS)
	}
}

// TestLT6_AddTableWithRows (LT5, LT6): POST /admin/tables' AddTable of a
// table holding rows, split over 4 regions, while a workload writes to it
// during the snapshot (from the chunk hook, so after S): the table is
// followed at once, its rows at S are copied once each at commit_ts S,
// the stream's rows above S follow them, and the collection equals the
// table at the final ts; the other table kept streaming.
func TestLT6_AddTableWithRows(t *testing.T)      { testAddTableWithRows(t, false) }
func TestLT6_Wire_AddTableWithRows(t *testing.T) { testAddTableWithRows(t, true) }

func testAddTableWithRows(t *testing.T, wire bool) {
	r := newAddRig(t, wire, 21)
	log := &syncWriter{w: &bytes.Buffer{}}
	var chunks atomic.Int64
	cfg := r.addConfig(t, log, func(snapshot.Task, int) error {
		if chunks.Add(1)%3 == 0 {
			r.step(t)
		}
		return nil
	})
	a, err := Start(r.ctx, r.up, r.emu, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	if _, err := a.AddTable(r.ctx, "shop", "items"); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(a.MirroredTables()); !strings.Contains(got, "shop.items") {
		t.Fatalf("followed %s right after AddTable", got)
	}
	rows, err := a.WaitAdded(r.ctx, "shop", "items")
	if err != nil {
		t.Fatal(err)
	}
	if chunks.Load() < 3 {
		t.Fatalf("only %d chunks: no workload ran during the snapshot", chunks.Load())
	}
	r.finishBoth(t)
	s, logged := addedTs(t, log.String())
	if int64(rows) != r.rows || logged != r.rows {
		t.Errorf("snapshot copied %d rows (log %d), the table held %d at S", rows, logged, r.rows)
	}
	checkHandoff(t, r.sinks[0], s, r.rows)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLT6_RestartDuringAddedTableSnapshot (LT6): the adapter stops in the
// middle of an added table's snapshot; the next start drops the partly
// copied collection and says so; adding the table again copies it whole.
func TestLT6_RestartDuringAddedTableSnapshot(t *testing.T)      { testAddRestart(t, false) }
func TestLT6_Wire_RestartDuringAddedTableSnapshot(t *testing.T) { testAddRestart(t, true) }

func testAddRestart(t *testing.T, wire bool) {
	r := newAddRig(t, wire, 23)
	log := &syncWriter{w: &bytes.Buffer{}}
	var cur atomic.Pointer[Adapter]
	var chunks atomic.Int64
	closed := make(chan error, 1)
	var once sync.Once
	cfg := r.addConfig(t, log, func(snapshot.Task, int) error {
		if chunks.Add(1) == 3 {
			a := cur.Load()
			once.Do(func() { go func() { closed <- a.Close() }() })
			<-a.live.add.ctx.Done() // the stop reached the snapshot
		}
		return nil
	})
	a, err := Start(r.ctx, r.up, r.emu, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cur.Store(a)
	if _, err := a.AddTable(r.ctx, "shop", "items"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.WaitAdded(r.ctx, "shop", "items"); err == nil {
		t.Fatal("the snapshot finished although the adapter stopped in its middle")
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	r.step(t)

	// The restart drops the partial collection.
	log2 := &syncWriter{w: &bytes.Buffer{}}
	cfg = r.addConfig(t, log2, nil)
	a, err = Start(r.ctx, r.up, r.emu, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	if !strings.Contains(log2.String(), `did not finish before the stop: collection "shop.items" dropped`) {
		t.Fatalf("no message about the dropped collection:\n%s", log2.String())
	}
	st, err := r.emu.GetCollection(r.ctx, &apiv1.GetCollectionRequest{Name: "shop.items"})
	if err != nil || st.GetState() != apiv1.CollectionState_COLLECTION_STATE_DROPPED {
		t.Fatalf("shop.items after the restart: %v, %v; want dropped", st.GetState(), err)
	}
	if _, err := a.AddTable(r.ctx, "shop", "items"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.WaitAdded(r.ctx, "shop", "items"); err != nil {
		t.Fatal(err)
	}
	r.finishBoth(t)
	// The collection equals the table (finishBoth), so the rows counted
	// at S are the table's at S.
	s, logged := addedTs(t, log2.String())
	checkHandoff(t, r.sinks[1], s, logged)
}
