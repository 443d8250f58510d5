package adapter

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/emulator"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/upstream/pd"
	"github.com/searchfabric/sfemu/verify"
)

func newWireUpstream(t *testing.T, seed int64) *Upstream {
	t.Helper()
	up, err := NewUpstream(context.Background(), UpstreamConfig{Seed: seed, RealClock: true, ResolvedTsInterval: 20 * time.Millisecond, Wire: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	if up.Mode() != ModeWire || up.Servers == nil || up.PD == nil || len(up.PDAddrs()) != 1 || up.PDAddrs()[0] != up.Servers.PDAddr() {
		t.Fatalf("wire upstream: mode %v servers %v pd %v addrs %v", up.Mode(), up.Servers, up.PD, up.PDAddrs())
	}
	return up
}

// SR2: over PD the adapter holds a service GC safe point that follows its
// checkpoint (never above it), and a clean stop removes it.
func TestWire_GCHoldFollowsCheckpoint(t *testing.T) {
	seed := seedFor(t)
	ctx := context.Background()
	up := newWireUpstream(t, seed)
	ss := up.SQL.NewSession("")
	setupShop(t, ctx, ss)
	dir := t.TempDir()
	emu, err := emulator.Open(filepath.Join(dir, "emulator"), emulator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Close()
	gcCfg := pd.ServiceSafePointConfig{ServiceID: "sfemu-gc-test", TTL: time.Hour, RefreshEvery: 40 * time.Millisecond}
	a, err := Start(ctx, up, emu, Config{DataDir: dir, Tables: e2eTables, GC: gcCfg})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.GC == nil {
		t.Fatal("no GC hold over the wire")
	}
	// Play TiDB's GC worker: it announces a target far ahead, so the
	// minimum PD answers is the adapter's hold.
	pdc := up.PD.PD.PD()
	far, err := up.CurrentTs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	far += 1 << 40
	if _, err := pdc.UpdateServiceGCSafePoint(ctx, "gc_worker", 3600, far); err != nil {
		t.Fatal(err)
	}
	w := &workload{rng: rand.New(rand.NewSource(seed)), ss: ss}
	for i := 0; i < 100; i++ {
		w.step(t, ctx)
	}
	final, err := up.CurrentTs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := verify.WaitSafe(ctx, emu, e2eTables, final, 30*time.Second); err != nil {
		t.Fatalf("%v (runtime: %v)", err, a.RT.Err())
	}
	deadline := time.Now().Add(30 * time.Second) // hang guard
	for {
		held, err := pd.GCSafePoint(ctx, pdc)
		if err != nil {
			t.Fatal(err)
		}
		cp := a.RT.Stats().LastCheckpointTs
		if held >= cp {
			t.Fatalf("GC held at %d, not below the checkpoint %d", held, cp)
		}
		if held >= final-1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GC hold stuck at %d, checkpoint %d, want >= %d", held, cp, final-1)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	min, err := pd.GCSafePoint(ctx, pdc)
	if err != nil {
		t.Fatal(err)
	}
	if min != far {
		t.Fatalf("after a clean stop PD's minimum is %d, want the GC worker's %d (hold not removed)", min, far)
	}
}

// SR2: a start ts GC already passed is refused before anything reads,
// naming both values.
func TestWire_StartBelowGCRefused(t *testing.T) {
	ctx := context.Background()
	up := newWireUpstream(t, 5)
	ss := up.SQL.NewSession("")
	setupShop(t, ctx, ss)
	start, err := up.CurrentTs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ss.Exec(ctx, "INSERT INTO shop.products VALUES (1, 'a', 1, 1)"); err != nil {
		t.Fatal(err)
	}
	now, err := up.CurrentTs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	up.Cluster.GC(now)
	dir := t.TempDir()
	emu, err := emulator.Open(filepath.Join(dir, "emulator"), emulator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Close()
	_, err = Start(ctx, up, emu, Config{DataDir: dir, Tables: e2eTables, StartTs: start})
	if !errors.Is(err, pd.ErrStartTsBeforeGC) || !strings.Contains(err.Error(), "GC safe point") {
		t.Fatalf("want ErrStartTsBeforeGC, got %v", err)
	}
}

// SR1: a table that does not exist at the start ts fails resolution over
// the wire (no SQL front is asked), naming the table and the ts.
func TestWire_UnknownTableAtStartTs(t *testing.T) {
	ctx := context.Background()
	up := newWireUpstream(t, 6)
	ss := up.SQL.NewSession("")
	before, err := up.CurrentTs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	setupShop(t, ctx, ss)
	dir := t.TempDir()
	emu, err := emulator.Open(filepath.Join(dir, "emulator"), emulator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Close()
	_, err = Start(ctx, up, emu, Config{DataDir: dir, Tables: e2eTables, StartTs: before})
	if err == nil || !strings.Contains(err.Error(), "shop.products") || !strings.Contains(err.Error(), "does not exist at ts") {
		t.Fatalf("table created after the start ts: got %v", err)
	}
	_, err = Start(ctx, up, emu, Config{DataDir: dir, Tables: []TableRef{{DB: "shop", Table: "nope"}}})
	if err == nil || !strings.Contains(err.Error(), "shop.nope") {
		t.Fatalf("unknown table: got %v", err)
	}
}

// SR2: after a fatal error the hold stays (the next run resumes from the
// checkpoint it protects), and a hold PD no longer honours (the entry
// lapsed and GC passed the checkpoint) stops the adapter with
// ErrSnapshotLostByGC.
func TestWire_GCHoldKeptOnFatalAndLossIsFatal(t *testing.T) {
	ctx := context.Background()
	up := newWireUpstream(t, 8)
	ss := up.SQL.NewSession("")
	setupShop(t, ctx, ss)
	pdc := up.PD.PD.PD()
	gcCfg := pd.ServiceSafePointConfig{ServiceID: "sfemu-gc-fatal", TTL: time.Hour, RefreshEvery: 40 * time.Millisecond}

	// A fatal callback error: the hold stays.
	dir := t.TempDir()
	emu, err := emulator.Open(filepath.Join(dir, "emulator"), emulator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Close()
	errBoom := errors.New("boom")
	a, err := Start(ctx, up, emu, Config{DataDir: dir, Tables: e2eTables, GC: gcCfg, Tap: failingTap{err: errBoom}})
	if err != nil {
		t.Fatal(err)
	}
	held := a.GC.Held()
	// Play TiDB's GC worker (after the hold exists, so it is clamped).
	far, err := up.CurrentTs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	far += 1 << 40
	if _, err := pdc.UpdateServiceGCSafePoint(ctx, "gc_worker", 3600, far); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.Exec(ctx, "INSERT INTO shop.products VALUES (1, 'a', 1, 1)"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Done():
	case <-time.After(60 * time.Second): // hang guard
		t.Fatal("the failing callback did not stop the adapter")
	}
	if err := a.Close(); !errors.Is(err, errBoom) {
		t.Fatalf("want the callback's error, got %v", err)
	}
	// Checkpoints before the failing row may have advanced the hold (and a
	// renewal sent it), so the entry is somewhere from the first hold to the
	// last checkpoint's: present, not removed.
	last := a.GC.Held()
	if min, err := pd.GCSafePoint(ctx, pdc); err != nil || min < held || min > last || min == far {
		t.Fatalf("after a fatal stop PD's minimum is %d (err %v), want the adapter's hold in [%d, %d]", min, err, held, last)
	}

	// A lost hold: someone removes the entry while GC is far ahead.
	dir2 := t.TempDir()
	emu2, err := emulator.Open(filepath.Join(dir2, "emulator"), emulator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer emu2.Close()
	b, err := Start(ctx, up, emu2, Config{DataDir: dir2, Tables: e2eTables, GC: gcCfg})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := pdc.UpdateServiceGCSafePoint(ctx, gcCfg.ServiceID, 0, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.Done():
	case <-time.After(60 * time.Second): // hang guard
		t.Fatal("the adapter kept running after its GC hold was lost")
	}
	if err := b.Close(); !errors.Is(err, pd.ErrSnapshotLostByGC) {
		t.Fatalf("want ErrSnapshotLostByGC, got %v", err)
	}
}

type failingTap struct{ err error }

func (f failingTap) OnRowChanged(context.Context, minicdc.RowChanged) error { return f.err }
func (f failingTap) OnDDL(context.Context, minicdc.DDL) error               { return nil }
func (f failingTap) OnCheckpoint(context.Context, minicdc.Checkpoint) error { return nil }

// With an explicit start ts (sfemu run --pd --start-ts), a table-set
// change over the wire restarts the adapter with the new physical tables
// (the bridge stores their progress at the change, so the first run's
// start ts, when they did not exist, is not where they start).
func TestWire_TruncateWithExplicitStartTs(t *testing.T) {
	ctx := context.Background()
	up := newWireUpstream(t, 9)
	ss := up.SQL.NewSession("")
	setupShop(t, ctx, ss)
	start, err := up.CurrentTs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	emu, err := emulator.Open(filepath.Join(dir, "emulator"), emulator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Close()
	for i := 1; i <= 5; i++ {
		if _, err := ss.Exec(ctx, fmt.Sprintf("INSERT INTO shop.products VALUES (%d, 'p', 1, 1)", i)); err != nil {
			t.Fatal(err)
		}
	}
	sup, err := StartSupervisor(ctx, up, emu, Config{DataDir: dir, Tables: e2eTables, StartTs: start}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Close()
	for _, q := range []string{
		"TRUNCATE TABLE shop.products",
		"INSERT INTO shop.products VALUES (10, 'after', 2, 2)",
		"INSERT INTO shop.events VALUES (1, 10, 'view')",
	} {
		if _, err := ss.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	final, err := up.CurrentTs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := verify.WaitSafe(ctx, emu, e2eTables, final, 30*time.Second); err != nil {
		t.Fatalf("%v (supervisor: %v)", err, sup.Err())
	}
	// Followed in place (LT2): the same runtime, the same epoch.
	if a := sup.Adapter(); a.Resume.Epoch != 1 || a.RT.Err() != nil {
		t.Fatalf("after the TRUNCATE: epoch %d, runtime %v; want epoch 1 and running", a.Resume.Epoch, a.RT.Err())
	}
	expectConsistent(t, ctx, up, emu, e2eTables, final)
	if err := sup.Close(); err != nil {
		t.Fatal(err)
	}
}

// SR2: a start that fails after the hold was set removes it when nothing
// is stored yet, and keeps it (now at the stored progress) when a
// previous run left progress in the emulator.
func TestWire_GCHoldOnFailedStart(t *testing.T) {
	ctx := context.Background()
	gcCfg := pd.ServiceSafePointConfig{ServiceID: "sfemu-gc-failed-start", TTL: time.Hour, RefreshEvery: 40 * time.Millisecond}
	// A schema store that cannot open: its directory is a file.
	broken := func(t *testing.T, dir string) {
		t.Helper()
		if err := os.RemoveAll(filepath.Join(dir, "schemastore")); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "schemastore"), []byte("not a dir"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// holdExists plays TiDB's GC worker with a target far ahead (which
	// blocks any later start on this cluster): PD's minimum is then the
	// adapter's hold if it exists.
	holdExists := func(t *testing.T, up *Upstream) bool {
		t.Helper()
		pdc := up.PD.PD.PD()
		far, err := up.CurrentTs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		far += 1 << 40
		if _, err := pdc.UpdateServiceGCSafePoint(ctx, "gc_worker", 3600, far); err != nil {
			t.Fatal(err)
		}
		min, err := pd.GCSafePoint(ctx, pdc)
		if err != nil {
			t.Fatal(err)
		}
		return min != far
	}
	openEmu := func(t *testing.T, dir string) *emulator.Emulator {
		t.Helper()
		emu, err := emulator.Open(filepath.Join(dir, "emulator"), emulator.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { emu.Close() })
		return emu
	}

	t.Run("nothing stored", func(t *testing.T) {
		up := newWireUpstream(t, 10)
		setupShop(t, ctx, up.SQL.NewSession(""))
		dir := t.TempDir()
		emu := openEmu(t, dir)
		broken(t, dir)
		if _, err := Start(ctx, up, emu, Config{DataDir: dir, Tables: e2eTables, GC: gcCfg}); err == nil {
			t.Fatal("started with a broken schema store dir")
		}
		if holdExists(t, up) {
			t.Fatal("a failed first start left its hold")
		}
	})
	t.Run("progress stored", func(t *testing.T) {
		up := newWireUpstream(t, 11)
		ss := up.SQL.NewSession("")
		setupShop(t, ctx, ss)
		dir := t.TempDir()
		emu := openEmu(t, dir)
		errBoom := errors.New("boom")
		a, err := Start(ctx, up, emu, Config{DataDir: dir, Tables: e2eTables, GC: gcCfg, Tap: failingTap{err: errBoom}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ss.Exec(ctx, "INSERT INTO shop.products VALUES (1, 'a', 1, 1)"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-a.Done():
		case <-time.After(60 * time.Second): // hang guard
			t.Fatal("the failing callback did not stop the adapter")
		}
		_ = a.Close()
		// Remove the first run's hold, so only the failed start can set one.
		if _, err := up.PD.PD.PD().UpdateServiceGCSafePoint(ctx, gcCfg.ServiceID, 0, 0); err != nil {
			t.Fatal(err)
		}
		broken(t, dir)
		if _, err := Start(ctx, up, emu, Config{DataDir: dir, Tables: e2eTables, GC: gcCfg}); err == nil {
			t.Fatal("started with a broken schema store dir")
		}
		if !holdExists(t, up) {
			t.Fatal("a failed restart over stored progress dropped the hold")
		}
	})
}
