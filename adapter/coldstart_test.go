package adapter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/verify"
)

var errCrash = errors.New("simulated crash")

// crashTap fails the first DDL whose query starts with prefix: the
// runtime stops before the bridge sees that DDL, as if the process died
// right before it (the emulator keeps what was stored so far).
type crashTap struct {
	prefix string
	hit    atomic.Bool
}

func (c *crashTap) OnRowChanged(context.Context, minicdc.RowChanged) error { return nil }
func (c *crashTap) OnCheckpoint(context.Context, minicdc.Checkpoint) error { return nil }
func (c *crashTap) OnDDL(_ context.Context, ev minicdc.DDL) error {
	if strings.HasPrefix(ev.Query, c.prefix) {
		c.hit.Store(true)
		return errCrash
	}
	return nil
}

// TestColdStartAcrossTableSetChange (SR10): the process stops (no
// supervisor restart) before the adapter handled a TRUNCATE PARTITION and
// a TRUNCATE TABLE that are already committed upstream. The upstream's
// current catalog then names physical tables the collections do not map;
// a cold start builds the table set from what the collections map at
// their stored progress, replays both DDLs (two table-set restarts) and
// ends equal to the upstream.
func TestColdStartAcrossTableSetChange(t *testing.T) { testColdStart(t, false) }

// TestWire_ColdStartAcrossTableSetChange is the same over the embedded
// gRPC servers (tables resolved through the meta keys, SR1).
func TestWire_ColdStartAcrossTableSetChange(t *testing.T) { testColdStart(t, true) }

func testColdStart(t *testing.T, wire bool) {
	r := newShopRig(t, wire)
	ctx, up, emu, dir, rng, exec := r.ctx, r.up, r.emu, r.dir, r.rng, r.exec

	tap := &crashTap{prefix: "ALTER TABLE shop.orders TRUNCATE PARTITION"}
	a, err := Start(ctx, up, emu, Config{DataDir: dir, Tables: tablesetTables, Tap: tap})
	if err != nil {
		t.Fatal(err)
	}
	before := a.Bridge.PartitionNames()
	id := 1
	insert := func(n int) {
		for i := 0; i < n; i++ {
			exec("INSERT INTO shop.products VALUES " + typedRow(rng, id))
			exec(fmt.Sprintf("INSERT INTO shop.orders VALUES (%d, 1.5, 'o', NULL), (%d, 2.5, 'o', NULL)", id, 1000+id))
			id++
		}
	}
	insert(5)
	last := exec("INSERT INTO shop.products VALUES " + typedRow(rng, 999))
	if err := verify.WaitSafe(ctx, emu, tablesetTables, last, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	exec("ALTER TABLE shop.orders TRUNCATE PARTITION p0")
	insert(3)
	exec("TRUNCATE TABLE shop.products")
	insert(4)
	select {
	case <-a.Done():
	case <-time.After(30 * time.Second): // hang guard
		t.Fatal("the adapter did not stop at the TRUNCATE PARTITION")
	}
	if err := a.Close(); !errors.Is(err, errCrash) || !tap.hit.Load() {
		t.Fatalf("adapter stopped with %v, want the simulated crash", err)
	}

	// Cold start: the upstream's catalog now has other physical tables
	// than the collections map.
	var log bytes.Buffer
	var logMu sync.Mutex
	sup, err := StartSupervisor(ctx, up, emu, Config{DataDir: dir, Tables: tablesetTables}, lockedWriter{&logMu, &log})
	if err != nil {
		t.Fatalf("cold start: %v", err)
	}
	defer sup.Close()
	if got := sup.Adapter().Bridge.PartitionNames(); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("cold start follows %v, want the partitions the collections map: %v", got, before)
	}
	if ep := sup.Adapter().Resume.Epoch; ep != 2 {
		t.Fatalf("cold start epoch %d, want 2", ep)
	}
	insert(2)
	ts, err := up.CurrentTs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := verify.WaitSafe(ctx, emu, tablesetTables, ts, 30*time.Second); err != nil {
		logMu.Lock()
		defer logMu.Unlock()
		t.Fatalf("%v (supervisor err %v; log:\n%s)", err, sup.Err(), log.String())
	}
	expectConsistent(t, ctx, up, emu, tablesetTables, ts)
	// Both changes are followed in place by the cold-started adapter, no
	// restart (LT2): one log line each, the epoch stays 2.
	logMu.Lock()
	n := strings.Count(log.String(), "changed the tables of collection")
	logText := log.String()
	logMu.Unlock()
	if n != 2 || !strings.Contains(logText, "(no restart)") {
		t.Fatalf("%d table-set changes followed, want 2 (TRUNCATE PARTITION, TRUNCATE TABLE):\n%s", n, logText)
	}
	if ep := sup.Adapter().Resume.Epoch; ep != 2 {
		t.Fatalf("epoch %d after the changes, want 2 (no restart)", ep)
	}
}

// TestColdStartBeforeFirstCheckpoint (SR11): the adapter stops before its
// first checkpoint stored any progress (the collections exist, their
// partitions are unreported, E29); the next start begins at the
// collections' creation, not now, so the rows committed in between are
// not lost.
func TestColdStartBeforeFirstCheckpoint(t *testing.T) { testColdStartUnreported(t, false) }

// TestWire_ColdStartBeforeFirstCheckpoint is the same over gRPC.
func TestWire_ColdStartBeforeFirstCheckpoint(t *testing.T) { testColdStartUnreported(t, true) }

func testColdStartUnreported(t *testing.T, wire bool) {
	r := newShopRig(t, wire)
	ctx, up, emu, dir, rng := r.ctx, r.up, r.emu, r.dir, r.rng
	exec := func(q string) { r.exec(q) }

	a, err := Start(ctx, up, emu, Config{DataDir: dir, Tables: tablesetTables, Tap: &failTap{fail: true}})
	if err != nil {
		t.Fatal(err)
	}
	created := a.Resume.StartTs
	for i := 1; i <= 6; i++ {
		exec("INSERT INTO shop.products VALUES " + typedRow(rng, i))
		exec(fmt.Sprintf("INSERT INTO shop.orders VALUES (%d, 1.5, 'o', NULL), (%d, 2.5, 'o', NULL)", i, 1000+i))
	}
	select {
	case <-a.Done():
	case <-time.After(30 * time.Second): // hang guard
		t.Fatal("the adapter did not stop at its first checkpoint")
	}
	if err := a.Close(); !errors.Is(err, errBoom) {
		t.Fatalf("adapter stopped with %v, want the injected failure", err)
	}
	prog, err := emu.GetProgress(ctx, &apiv1.GetProgressRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ps := range prog.GetPartitions() {
		if ps.GetResolvedTs() > 0 {
			t.Fatalf("progress stored before the first checkpoint: %v", ps)
		}
	}

	a, err = Start(ctx, up, emu, Config{DataDir: dir, Tables: tablesetTables})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.Resume.StartTs > created {
		t.Fatalf("second start at %d, after the collections' creation at %d", a.Resume.StartTs, created)
	}
	ts, err := up.CurrentTs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := verify.WaitSafe(ctx, emu, tablesetTables, ts, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	expectConsistent(t, ctx, up, emu, tablesetTables, ts)
}
