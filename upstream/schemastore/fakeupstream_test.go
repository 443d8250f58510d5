package schemastore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/sqlfront"
	"github.com/searchfabric/sfemu/upstream/schemastore"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
)

// step is one DDL run through the fake cluster's SQL front, with what the
// front's catalog said afterwards about the table it touched.
type step struct {
	sql      string
	table    string // table to check afterwards ("" for none)
	commitTs uint64
	info     *model.TableInfo
}

func shape(ti *model.TableInfo) string {
	var cols []string
	for _, c := range ti.Columns {
		cols = append(cols, fmt.Sprintf("%d:%s:%d", c.ID, c.Name.O, c.FieldType.GetType()))
	}
	var idx []string
	for _, i := range ti.Indices {
		idx = append(idx, i.Name.O)
	}
	return fmt.Sprintf("id=%d name=%s cols=%v idx=%v parts=%v", ti.ID, ti.Name.O, cols, idx, ti.PhysicalIDs())
}

// TestFakeUpstreamSQLSequence runs DDL through fakeupstream's SQL front
// (which writes tidb_ddl_job rows the way TiDB does), follows the job span
// through fakeupstream's kvevent.Source, and checks every table version at
// FinishedTs-1 and FinishedTs against the front's own catalog.
func TestFakeUpstreamSQLSequence(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := fakeupstream.New(fakeupstream.Config{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := sqlfront.New(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	ss := srv.NewSession("")
	if _, err := ss.Exec(ctx, "CREATE DATABASE d"); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.Exec(ctx, "USE d"); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.Exec(ctx, "CREATE TABLE pre (id BIGINT PRIMARY KEY, v INT)"); err != nil {
		t.Fatal(err)
	}
	start, _ := c.CurrentTs(ctx)
	src := c.NewSource(fakeupstream.SourceConfig{})
	store, err := schemastore.New(schemastore.Config{Dir: t.TempDir(), Snapshot: c, Source: src, InitialTs: start})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.RegisterKeyspace(ctx, 0); err != nil {
		t.Fatal(err)
	}
	preInfo, _, _ := srv.TableInfo("d", "pre")
	if got, err := store.GetTableInfo(preInfo.ID, start); err != nil || shape(got) != shape(preInfo) {
		t.Fatalf("snapshot table: %v %v", got, err)
	}

	steps := []*step{
		{sql: "CREATE TABLE t (id BIGINT PRIMARY KEY, a VARCHAR(16))", table: "t"},
		{sql: "ALTER TABLE t ADD COLUMN b INT DEFAULT 7", table: "t"},
		{sql: "ALTER TABLE t ADD INDEX ia (a)", table: "t"},
		{sql: "ALTER TABLE t DROP COLUMN b", table: "t"},
		{sql: "CREATE TABLE rp (id BIGINT PRIMARY KEY, v INT) PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (100), PARTITION p1 VALUES LESS THAN (1000))", table: "rp"},
		{sql: "ALTER TABLE rp ADD PARTITION (PARTITION p2 VALUES LESS THAN (10000))", table: "rp"},
		{sql: "ALTER TABLE rp TRUNCATE PARTITION p0", table: "rp"},
		{sql: "ALTER TABLE rp DROP PARTITION p1", table: "rp"},
		{sql: "TRUNCATE TABLE pre", table: "pre"},
		{sql: "RENAME TABLE t TO t2", table: "t2"},
		{sql: "DROP TABLE pre"},
	}
	for _, st := range steps {
		res, err := ss.Exec(ctx, st.sql)
		if err != nil {
			t.Fatalf("%s: %v", st.sql, err)
		}
		st.commitTs = res.CommitTs
		if st.table != "" {
			if st.info, _, err = srv.TableInfo("d", st.table); err != nil {
				t.Fatal(err)
			}
		}
	}
	target, _ := c.CurrentTs(ctx)
	deadline := time.Now().Add(20 * time.Second)
	for store.ResolvedTs() < target {
		if err := store.Err(); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("store resolved ts %d never reached %d", store.ResolvedTs(), target)
		}
		if err := c.Advance(100 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if err := src.Pump(); err != nil {
			t.Fatal(err)
		}
	}

	evs, _, err := store.FetchTableTriggerDDLEvents(start, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != len(steps) {
		t.Fatalf("%d events for %d DDLs", len(evs), len(steps))
	}
	var prev = map[string]*model.TableInfo{"pre": preInfo}
	for i, st := range steps {
		ev := evs[i]
		if ev.FinishedTs != st.commitTs || ev.Query != st.sql {
			t.Errorf("event %d: ts %d query %q, want %d %q", i, ev.FinishedTs, ev.Query, st.commitTs, st.sql)
		}
		if st.info == nil {
			continue
		}
		for _, phys := range st.info.PhysicalIDs() {
			got, err := store.GetTableInfo(phys, st.commitTs)
			if err != nil || shape(got) != shape(st.info) {
				t.Errorf("%s: physical %d at FinishedTs: %v (%v), want %s", st.sql, phys, got, err, shape(st.info))
				continue
			}
			if p := prev[st.table]; p != nil && p.ID == st.info.ID {
				before, err := store.GetTableInfo(phys, st.commitTs-1)
				if err == nil && shape(before) != shape(p) {
					t.Errorf("%s: physical %d at FinishedTs-1: %s, want %s", st.sql, phys, shape(before), shape(p))
				}
			}
		}
		prev[st.table] = st.info
	}
	// metadata spot checks
	byQuery := map[string]schemastore.DDLEvent{}
	for _, ev := range evs {
		byQuery[ev.Query] = ev
	}
	rp := steps[5].info
	if ev := byQuery[steps[5].sql]; len(ev.NeedAddedTables) != 1 || ev.NeedAddedTables[0].TableID != rp.PhysicalIDs()[2] {
		t.Errorf("add partition event: %+v", ev.NeedAddedTables)
	}
	if ev := byQuery[steps[6].sql]; len(ev.NeedDroppedTables) != 1 || len(ev.NeedAddedTables) != 1 {
		t.Errorf("truncate partition event: dropped %v added %v", ev.NeedDroppedTables, ev.NeedAddedTables)
	}
	if ev := byQuery[steps[8].sql]; !reflect.DeepEqual(ev.NeedDroppedTables, []int64{preInfo.ID}) {
		t.Errorf("truncate table event: %+v", ev.NeedDroppedTables)
	}
	if ev := byQuery[steps[9].sql]; ev.ExtraTableName != "t" || ev.TableName != "t2" {
		t.Errorf("rename event: %s -> %s", ev.ExtraTableName, ev.TableName)
	}
	if _, err := store.GetTableInfo(steps[8].info.ID, target); !errors.Is(err, schemastore.ErrDropped) {
		t.Errorf("dropped table: %v", err)
	}
	if b, _ := json.Marshal(evs[len(evs)-1].TableNameChange); len(b) == 0 {
		t.Error("drop event without name change")
	}
}

// pumpUntil drives the fake cluster until the store's resolved ts reaches
// the cluster's current ts.
func pumpUntil(t *testing.T, ctx context.Context, c *fakeupstream.Cluster, src *fakeupstream.Source, store *schemastore.Store) uint64 {
	t.Helper()
	target, _ := c.CurrentTs(ctx)
	deadline := time.Now().Add(20 * time.Second)
	for store.ResolvedTs() < target {
		if err := store.Err(); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("store resolved ts %d never reached %d", store.ResolvedTs(), target)
		}
		if err := c.Advance(100 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if err := src.Pump(); err != nil {
			t.Fatal(err)
		}
	}
	return target
}

// TestFakeUpstreamRestartAndDropDatabase: a store restarted on its file
// resubscribes from its persisted resolved ts through a new Source, picks
// up DDLs run while it was down, and handles DROP DATABASE.
func TestFakeUpstreamRestartAndDropDatabase(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := fakeupstream.New(fakeupstream.Config{Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := sqlfront.New(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	ss := srv.NewSession("")
	exec := func(sql string) uint64 {
		t.Helper()
		res, err := ss.Exec(ctx, sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return res.CommitTs
	}
	start, _ := c.CurrentTs(ctx)
	dir := t.TempDir()
	open := func(cfg schemastore.Config) (*schemastore.Store, *fakeupstream.Source, context.CancelFunc) {
		t.Helper()
		src := c.NewSource(fakeupstream.SourceConfig{})
		cfg.Dir, cfg.Source = dir, src
		s, err := schemastore.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		sctx, scancel := context.WithCancel(ctx)
		if err := s.RegisterKeyspace(sctx, 0); err != nil {
			t.Fatal(err)
		}
		return s, src, scancel
	}
	store, src, stop := open(schemastore.Config{Snapshot: c, InitialTs: start})
	exec("CREATE DATABASE d")
	exec("USE d")
	exec("CREATE TABLE t (id BIGINT PRIMARY KEY, a VARCHAR(16))")
	pumpUntil(t, ctx, c, src, store)
	stop()
	_ = store.Close()
	_ = src.Close()

	// while the store is down
	addTs := exec("ALTER TABLE t ADD COLUMN b INT")
	exec("CREATE TABLE u (id BIGINT PRIMARY KEY) PARTITION BY HASH (id) PARTITIONS 2")
	uInfo, _, _ := srv.TableInfo("d", "u")
	tInfo, _, _ := srv.TableInfo("d", "t")
	dropTs := exec("DROP DATABASE d")

	store, src, stop = open(schemastore.Config{}) // no snapshot reader: must resume from the file
	defer stop()
	defer store.Close()
	pumpUntil(t, ctx, c, src, store)
	if ti, err := store.GetTableInfo(tInfo.ID, addTs); err != nil || ti.ColumnByName("b") == nil {
		t.Fatalf("DDL run while down: %v %v", ti, err)
	}
	if ti, err := store.GetTableInfo(tInfo.ID, addTs-1); err != nil || ti.ColumnByName("b") != nil {
		t.Fatalf("before it: %v %v", ti, err)
	}
	evs, _, err := store.FetchTableTriggerDDLEvents(start, 100)
	if err != nil {
		t.Fatal(err)
	}
	drop := evs[len(evs)-1]
	want := append([]int64{tInfo.ID}, uInfo.PhysicalIDs()...)
	if drop.FinishedTs != dropTs || !reflect.DeepEqual(drop.NeedDroppedTables, want) || drop.TableNameChange == nil ||
		drop.TableNameChange.DropDatabaseName != "d" || len(drop.TableNameChange.DropName) != 2 {
		t.Errorf("drop database event: %+v %+v, want dropped %v", drop, drop.TableNameChange, want)
	}
	for _, id := range want {
		if _, err := store.GetTableInfo(id, dropTs); !errors.Is(err, schemastore.ErrDropped) {
			t.Errorf("table %d after drop database: %v", id, err)
		}
	}
}
