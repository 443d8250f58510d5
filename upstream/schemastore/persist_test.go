package schemastore

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
)

// sampleHistory applies a few DDLs of several kinds.
func sampleHistory(e *env) {
	e.apply(1100, withTable(job(1, model.ActionAddColumn, 10, 20, 2), tbl(20, "t", 3)))
	e.apply(1200, withTable(job(2, model.ActionTruncateTable, 10, 30, 3), withParts(tbl(90, "pt", 1), 91, 92)))
	e.apply(1300, withTable(job(3, model.ActionCreateTable, 10, 95, 4), tbl(95, "n", 1)))
}

func (e *env) closeStore() {
	e.t.Helper()
	e.cancel()
	if err := e.store.Close(); err != nil {
		e.t.Fatal(err)
	}
}

// openErr opens a new store on e.dir and returns the RegisterKeyspace error.
func (e *env) openErr() error {
	s, err := New(e.cfg)
	if err != nil {
		return err
	}
	err = s.RegisterKeyspace(context.Background(), 0)
	_ = s.Close()
	return err
}

// Rules SS55 (no snapshot on restart, resubscribe from the persisted resolved
// ts, unresolved jobs come again), SS14 (the job table layout is persisted).
func TestRestartResumesFromPersistedState(t *testing.T) {
	e := baseEnv(t)
	sampleHistory(e)
	e.resolve(1500)
	before := eventSummaries(e.events(snapTs))
	e.cfg.Snapshot = nil // a restart must not need the upstream snapshot
	e.reopen()
	if e.store.ResolvedTs() != 1500 {
		t.Errorf("resolved ts after restart %d", e.store.ResolvedTs())
	}
	if got := eventSummaries(e.events(snapTs)); len(got) != len(before) || got[1].Table != 90 {
		t.Errorf("events after restart %+v", got)
	}
	if colNames(e.info(20, 1100)) != "id,c1,c2,c3" || colNames(e.info(20, 1099)) != "id,c1,c2" || e.info(91, 1200).ID != 90 {
		t.Error("history after restart")
	}
	if _, err := e.store.GetTableInfo(31, 1200); !errors.Is(err, ErrDropped) {
		t.Errorf("dropped partition after restart: %v", err)
	}
	// ingestion continues on top of the reloaded state (private copies
	// were reloaded too): a DDL after restart derives from them
	e.apply(1600, withTable(job(4, model.ActionDropTable, 10, 95, 5), tbl(95, "n", 1)))
	if ev := e.events(1500); len(ev) != 1 || ev[0].NeedDroppedTables[0] != 95 {
		t.Errorf("DDL after restart: %+v", ev)
	}
	// jobs cached but not yet resolved are not persisted: after a restart
	// the subscription restarts at the resolved ts and they come again
	e.deliver(1700, withTable(job(5, model.ActionAddColumn, 10, 20, 6), tbl(20, "t", 4)))
	e.reopen()
	subs, _ := e.store.DDLSubscriptions()
	if subs[0].StartTs != 1600 {
		t.Errorf("resubscribe from %d", subs[0].StartTs)
	}
	e.apply(1700, withTable(job(5, model.ActionAddColumn, 10, 20, 6), tbl(20, "t", 4)))
	if colNames(e.info(20, 1700)) != "id,c1,c2,c3,c4" {
		t.Error("re-delivered job after restart")
	}
}

// Rule SS55: a persisted resolved ts below the safe point is a GCError.
func TestResumeBelowGCSafePoint(t *testing.T) {
	e := baseEnv(t)
	e.resolve(1500)
	e.closeStore()
	e.snap.safe = 1600
	err := e.openErr()
	var ge *GCError
	if !errors.As(err, &ge) || ge.Ts != 1500 || ge.GCTs != 1600 {
		t.Fatalf("resume below the safe point: %v", err)
	}
	e.snap.safe = 1500
	if err := e.openErr(); err != nil {
		t.Fatalf("resume at the safe point: %v", err)
	}
}

// Rules SS50 (one file per keyspace), SS54 (open verifies the keyspace).
func TestWrongKeyspaceFileRejected(t *testing.T) {
	e := baseEnv(t)
	e.closeStore()
	// move keyspace 0's file to keyspace 7's name
	s, _ := New(e.cfg)
	if err := os.Rename(s.Path(0), s.Path(7)); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterKeyspace(context.Background(), 7); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v", err)
	}
}

// mutateBolt edits the closed store file directly, as a crash or a disk
// fault would, bypassing the store's transactions.
func (e *env) mutateBolt(fn func(tx *bolt.Tx) error) {
	e.t.Helper()
	db, err := bolt.Open(e.store.Path(0), 0o600, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := db.Update(fn); err != nil {
		e.t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		e.t.Fatal(err)
	}
}

// Rules SS53 (checksums, record counts), SS54.
//
// Rule SS51: the records live in the buckets named there (dbs, versions,
// tinfo, events, meta).
func TestCorruptStoreDetectedAtOpen(t *testing.T) {
	cases := []struct {
		name string
		fn   func(tx *bolt.Tx) error
		want string
	}{
		{"flipped value byte", func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketTInfo)
			k, v := b.Cursor().First()
			v = append([]byte(nil), v...)
			v[len(v)-2] ^= 0x20
			return b.Put(append([]byte(nil), k...), v)
		}, "checksum"},
		{"lost version record", func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketVersions)
			k, _ := b.Cursor().Last()
			return b.Delete(append([]byte(nil), k...))
		}, ""},
		{"lost event record", func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketEvents)
			k, _ := b.Cursor().First()
			return b.Delete(append([]byte(nil), k...))
		}, "record counts"},
		{"extra record", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketDBs).Put(be64(77), seal([]byte(`{"id":77,"db_name":{"O":"x","L":"x"}}`)))
		}, "record counts"},
		{"missing format", func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Delete(keyFormat) }, "never completed"},
		{"resolved below gc", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketMeta).Put(keyResolvedTs, seal(be64(10)))
		}, "out of order"},
		{"bad meta length", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketMeta).Put(keyGCTs, seal([]byte{1}))
		}, "want 8"},
		{"table in unknown schema", func(tx *bolt.Tx) error { return tx.Bucket(bucketDBs).Delete(be64(10)) }, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := baseEnv(t)
			sampleHistory(e)
			e.closeStore()
			e.mutateBolt(c.fn)
			err := e.openErr()
			var ce *CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("got %v, want a CorruptError", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("%q does not mention %q", err, c.want)
			}
		})
	}
}

// Rules SS53, SS54.
func TestCorruptFileBytes(t *testing.T) {
	t.Run("meta pages overwritten", func(t *testing.T) {
		e := baseEnv(t)
		sampleHistory(e)
		e.closeStore()
		path := e.store.Path(0)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i := 16; i < 64; i++ { // inside both meta pages' headers
			data[i] ^= 0xff
			data[4096+i] ^= 0xff
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := e.openErr(); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("value bytes on a data page", func(t *testing.T) {
		e := baseEnv(t)
		sampleHistory(e)
		e.closeStore()
		path := e.store.Path(0)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// every copy: bbolt leaves stale copies on freed pages
		n := bytes.Count(data, []byte(`"c3"`))
		if n == 0 {
			t.Fatal("value not found in file")
		}
		data = bytes.ReplaceAll(data, []byte(`"c3"`), []byte(`"X3"`))
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		err = e.openErr()
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "checksum") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("not a bbolt file", func(t *testing.T) {
		e := baseEnv(t)
		e.closeStore()
		if err := os.WriteFile(e.store.Path(0), bytes.Repeat([]byte("garbage!"), 2048), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := e.openErr(); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("got %v", err)
		}
	})
}

// TestWriteErrorsPropagate: a failed commit stops the store; the resolved
// ts does not move and every call returns the write error.
//
// Rules SS52, SS19, minicdc divergence D3 (write errors propagate), SS45 (a batch that failed to persist never becomes
// visible: the resolved ts is not published).
func TestWriteErrorsPropagate(t *testing.T) {
	e := baseEnv(t)
	boom := errors.New("disk full")
	e.store.p.failHook = func() error { return boom }
	e.deliver(1100, withTable(job(1, model.ActionAddColumn, 10, 20, 2), tbl(20, "t", 3)))
	e.consumer.AdvanceResolvedTs(1100)
	if err := e.store.Err(); !errors.Is(err, boom) {
		t.Fatalf("Err() = %v", err)
	}
	if e.store.ResolvedTs() != snapTs {
		t.Errorf("resolved ts moved to %d after a failed write", e.store.ResolvedTs())
	}
	for name, err := range map[string]error{
		"GetTableInfo": func() error { _, err := e.store.GetTableInfo(20, snapTs); return err }(),
		"Fetch":        func() error { _, _, err := e.store.FetchTableTriggerDDLEvents(snapTs, 1); return err }(),
		"State":        func() error { _, err := e.store.GetTableDDLEventState(20); return err }(),
		"Register":     e.store.RegisterTable(20, snapTs),
	} {
		if !errors.Is(err, boom) {
			t.Errorf("%s after write failure: %v", name, err)
		}
	}
	// nothing of the failed batch reached the disk
	e.store.p.failHook = nil
	e.closeStore()
	e.open()
	if e.store.ResolvedTs() != snapTs || len(e.events(snapTs)) != 0 {
		t.Error("failed batch persisted")
	}
	// GC write errors are returned directly
	e.apply(1100, withTable(job(1, model.ActionAddColumn, 10, 20, 2), tbl(20, "t", 3)))
	e.store.p.failHook = func() error { return boom }
	if err := e.store.GC(1100); !errors.Is(err, boom) {
		t.Errorf("GC write error: %v", err)
	}
}

// TestFailedCreationLeavesNoStore: a fresh store whose first write fails is
// not half-created: the next open takes the snapshot again.
//
// Rule SS53: creation is one transaction.
func TestFailedCreationLeavesNoStore(t *testing.T) {
	f := newFakeSnapshot()
	f.withSystemTables(t, nil)
	f.addDB(t, nil, dbInfo(10, "db"))
	f.addTable(t, nil, 10, tbl(20, "t", 1))
	dir := t.TempDir()
	s, _ := New(Config{Dir: dir, Snapshot: f, InitialTs: snapTs})
	p, err := openBolt(s.Path(0))
	if err != nil {
		t.Fatal(err)
	}
	p.failHook = func() error { return errors.New("power cut") }
	if _, err := s.create(context.Background(), p, 0); err == nil {
		t.Fatal("creation with a failed commit succeeded")
	}
	_ = p.db.Close()
	s2, _ := New(Config{Dir: dir, Snapshot: f, InitialTs: snapTs})
	if err := s2.RegisterKeyspace(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if _, err := s2.GetTableInfo(20, snapTs); err != nil {
		t.Errorf("snapshot table after recreating: %v", err)
	}
}
