package workload

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/demo"
	"github.com/searchfabric/sfemu/fakeupstream/sqlfront"
)

func products(t *testing.T, c *fakeupstream.Cluster) int {
	t.Helper()
	ctx := context.Background()
	ts, err := c.CurrentTs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := sqlfront.ReadTable(ctx, c, demo.Database, "products", ts)
	if err != nil {
		t.Fatal(err)
	}
	return len(snap.Rows)
}

// The runner writes at its rate, holds pause around each tick's steps (a
// check holding it sees no writes), continues above ids written from
// outside (a duplicate key resumes the workload) and stops with nil when
// its context ends.
func TestRunnerWritesPausesAndSkipsOutsideIDs(t *testing.T) {
	ctx := context.Background()
	c, err := fakeupstream.New(fakeupstream.Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv, err := sqlfront.New(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := demo.Setup(ctx, srv.NewSession("")); err != nil {
		t.Fatal(err)
	}
	r, err := New(ctx, srv, c, Config{Seed: 1, Rate: 500, DDLEvery: 1000})
	if err != nil {
		t.Fatal(err)
	}
	// The ids the runner would take first, written from outside after it
	// read the table.
	ss := srv.NewSession("")
	for id := 1; id <= 3; id++ {
		if _, err := ss.Exec(ctx, fmt.Sprintf("INSERT INTO demo.products (id, title, stock) VALUES (%d, 'outside', 1)", id)); err != nil {
			t.Fatal(err)
		}
	}

	var pause sync.Mutex
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx, &pause) }()

	deadline := time.Now().Add(30 * time.Second)
	for products(t, c) < 20 {
		select {
		case err := <-done:
			t.Fatalf("runner stopped early: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("runner wrote %d products in 30 s", products(t, c))
		}
		time.Sleep(10 * time.Millisecond)
	}

	pause.Lock()
	held := products(t, c)
	time.Sleep(100 * time.Millisecond)
	if n := products(t, c); n != held {
		pause.Unlock()
		t.Fatalf("writes while paused: %d products, then %d", held, n)
	}
	pause.Unlock()

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
}

// TestS25StepsDueTogetherRunOnLanes (S25): the steps due at one tick
// are spread over the lanes (each on its own session, run at once), all
// of them are counted, every lane writes its own ids, and lane 0 keeps the
// DDL cycle at about one DDL per DDLEvery steps of all lanes.
func TestS25StepsDueTogetherRunOnLanes(t *testing.T) {
	ctx := context.Background()
	c, err := fakeupstream.New(fakeupstream.Config{Seed: 1, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv, err := sqlfront.Open(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := demo.Setup(ctx, srv.NewSession("")); err != nil {
		t.Fatal(err)
	}
	r, err := New(ctx, srv, c, Config{Seed: 1, Rate: 100, DDLEvery: 40})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.lanes) != DefaultLanes {
		t.Fatalf("%d lanes, want %d", len(r.lanes), DefaultLanes)
	}
	v0 := srv.SchemaVersion()
	for i := 0; i < 10; i++ {
		if err := r.runSteps(ctx, 18); err != nil {
			t.Fatal(err)
		}
	}
	if r.Steps() != 180 {
		t.Fatalf("%d steps counted, want 180", r.Steps())
	}
	classes := map[int64]bool{}
	ts, err := c.CurrentTs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := sqlfront.ReadTable(ctx, c, demo.Database, "products", ts)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range snap.Rows {
		classes[row.Values[0].GetInt64()%DefaultLanes] = true
	}
	if len(classes) != DefaultLanes {
		t.Fatalf("products of %d lanes' id classes, want %d", len(classes), DefaultLanes)
	}
	// 180 steps with a DDL every 40: lane 0 ran 45 steps with one every 10.
	if ddls := srv.SchemaVersion() - v0; ddls < 3 || ddls > 5 {
		t.Fatalf("%d schema changes in 180 steps with DDLEvery 40", ddls)
	}
}
