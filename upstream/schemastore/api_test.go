package schemastore

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
)

// Rule SS1: every call before RegisterKeyspace is ErrNotRegistered.
func TestCallsBeforeRegisterKeyspaceFail(t *testing.T) {
	s, err := New(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetTableInfo(1, 1); !errors.Is(err, ErrNotRegistered) {
		t.Errorf("GetTableInfo: %v", err)
	}
	if _, err := s.GetTableDDLEventState(1); !errors.Is(err, ErrNotRegistered) {
		t.Errorf("GetTableDDLEventState: %v", err)
	}
	if err := s.RegisterTable(1, 1); !errors.Is(err, ErrNotRegistered) {
		t.Errorf("RegisterTable: %v", err)
	}
	if _, _, err := s.FetchTableTriggerDDLEvents(0, 1); !errors.Is(err, ErrNotRegistered) {
		t.Errorf("Fetch: %v", err)
	}
	if _, err := New(Config{}); !errors.Is(err, ErrBadInput) {
		t.Errorf("empty Dir accepted: %v", err)
	}
}

// Rules SS10 (start below the safe point is a GCError naming both; 0 takes the
// safe point), SS12 (the snapshot ts is the GC and resolved ts), SS13 (no
// tidb_ddl_job layout is a startup error), SS1 (RegisterKeyspace only once).
func TestRegisterKeyspaceErrors(t *testing.T) {
	f := newFakeSnapshot()
	f.withSystemTables(t, nil)
	f.safe = 5000
	s, _ := New(Config{Dir: t.TempDir(), Snapshot: f, InitialTs: 4000})
	err := s.RegisterKeyspace(context.Background(), 0)
	var ge *GCError
	if !errors.As(err, &ge) || !strings.Contains(err.Error(), "4000") || !strings.Contains(err.Error(), "5000") || !errors.Is(err, ErrBelowGC) {
		t.Fatalf("start below GC safe point: %v", err)
	}
	// InitialTs 0 takes the safe point
	s, _ = New(Config{Dir: t.TempDir(), Snapshot: f})
	if err := s.RegisterKeyspace(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if s.GCTs() != 5000 || s.ResolvedTs() != 5000 {
		t.Errorf("snapshot at %d/%d, want the safe point", s.GCTs(), s.ResolvedTs())
	}
	if err := s.RegisterKeyspace(context.Background(), 0); err == nil {
		t.Error("second RegisterKeyspace accepted")
	}
	_ = s.Close()
	// no tidb_ddl_job layout in the snapshot
	s, _ = New(Config{Dir: t.TempDir(), Snapshot: newFakeSnapshot(), InitialTs: 1})
	if err := s.RegisterKeyspace(context.Background(), 0); err == nil || !strings.Contains(err.Error(), "tidb_ddl_job") {
		t.Errorf("missing job table: %v", err)
	}
	// snapshot read errors propagate
	bad := newFakeSnapshot()
	bad.failScan = errors.New("tikv down")
	s, _ = New(Config{Dir: t.TempDir(), Snapshot: bad, InitialTs: 1})
	if err := s.RegisterKeyspace(context.Background(), 0); err == nil || !strings.Contains(err.Error(), "tikv down") {
		t.Errorf("scan error: %v", err)
	}
}

// Rule SS11: meta keys carry the keyspace prefix in next-gen mode.
func TestNextGenKeyspacePrefix(t *testing.T) {
	const ks = 0x0a0b0c
	prefix := []byte{'x', 0x0a, 0x0b, 0x0c}
	f := newFakeSnapshot()
	f.withSystemTables(t, prefix)
	f.addDB(t, prefix, dbInfo(10, "db"))
	f.addTable(t, prefix, 10, tbl(20, "t", 1))
	// unprefixed data of another keyspace must not leak in
	f.addDB(t, nil, dbInfo(11, "wrong"))
	f.addTable(t, nil, 11, tbl(21, "wrong", 1))
	s, _ := New(Config{Dir: t.TempDir(), Snapshot: f, InitialTs: snapTs, NextGen: true})
	if err := s.RegisterKeyspace(context.Background(), ks); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.GetTableInfo(20, snapTs); err != nil {
		t.Error(err)
	}
	if _, err := s.GetTableInfo(21, snapTs); !errors.Is(err, ErrUnknownTable) {
		t.Errorf("other keyspace leaked: %v", err)
	}
	subs, _ := s.DDLSubscriptions()
	raw, err := decodeComparable(subs[0].Span.StartKey)
	if err != nil || string(raw[:4]) != string(prefix) || raw[4] != 't' {
		t.Errorf("DDL span start %x (%v)", raw, err)
	}
	s2, _ := New(Config{Dir: t.TempDir(), Snapshot: f, NextGen: true})
	if err := s2.RegisterKeyspace(context.Background(), 1<<24); !errors.Is(err, ErrBadInput) {
		t.Errorf("keyspace id over 24 bits: %v", err)
	}
}

// Rule SS2: when the registration context ends every call returns ErrStopped.
func TestContextEndStopsStore(t *testing.T) {
	e := baseEnv(t)
	e.cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := e.store.GetTableInfo(20, snapTs)
		if errors.Is(err, ErrStopped) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("store still answering after its context ended: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
}

// Rules SS30 (newest version <= ts), SS42 (ErrNotReady, Temporary, never blocks).
func TestLookupBoundaries(t *testing.T) {
	e := baseEnv(t)
	e.apply(2000, withTable(job(1, model.ActionAddColumn, 10, 20, 2), tbl(20, "t", 3)))
	cases := []struct {
		ts   uint64
		cols string
	}{{snapTs, "id,c1,c2"}, {1999, "id,c1,c2"}, {2000, "id,c1,c2,c3"}}
	for _, c := range cases {
		if got := colNames(e.info(20, c.ts)); got != c.cols {
			t.Errorf("at %d: %s, want %s", c.ts, got, c.cols)
		}
	}
	var le *LookupError
	_, err := e.store.GetTableInfo(20, 2001)
	if !errors.As(err, &le) || le.Kind != ErrNotReady || !le.Temporary() || le.ResolvedTs != 2000 {
		t.Errorf("ahead of resolved: %v", err)
	}
	e.resolve(2500)
	if colNames(e.info(20, 2500)) != "id,c1,c2,c3" {
		t.Error("after resolved moved on")
	}
	if err := e.store.RegisterTable(20, 1500); err != nil {
		t.Error(err)
	}
}

func TestFetchLimitAndCursor(t *testing.T) {
	e := baseEnv(t)
	// five DDLs: ts 1100, 1200, 1200, 1200, 1300
	e.deliver(1100, withTable(job(1, model.ActionAddColumn, 10, 20, 2), tbl(20, "t", 3)))
	e.deliver(1200, withTable(job(2, model.ActionAddColumn, 10, 20, 3), tbl(20, "t", 4)),
		withTable(job(3, model.ActionAddColumn, 10, 20, 4), tbl(20, "t", 5)),
		withTable(job(4, model.ActionAddColumn, 10, 20, 5), tbl(20, "t", 6)))
	e.deliver(1300, withTable(job(5, model.ActionAddColumn, 10, 20, 6), tbl(20, "t", 7)))
	e.resolve(1250)

	if _, _, err := e.store.FetchTableTriggerDDLEvents(snapTs, 0); !errors.Is(err, ErrBadInput) {
		t.Errorf("limit 0: %v", err)
	}
	// partial batch: next = resolved ts
	evs, next, err := e.store.FetchTableTriggerDDLEvents(snapTs, 10)
	if err != nil || len(evs) != 4 || next != 1250 {
		t.Fatalf("partial: %d events next %d %v", len(evs), next, err)
	}
	// full batch: next = last FinishedTs
	evs, next, _ = e.store.FetchTableTriggerDDLEvents(snapTs, 1)
	if len(evs) != 1 || next != 1100 {
		t.Fatalf("full: %d next %d", len(evs), next)
	}
	// limit 2 from 1100 would split the three events at 1200: the whole
	// group comes back rather than losing the rest behind the cursor
	evs, next, _ = e.store.FetchTableTriggerDDLEvents(1100, 2)
	if len(evs) != 3 || next != 1200 {
		t.Fatalf("group larger than limit: %d events next %d", len(evs), next)
	}
	// limit 3 from snapTs: 1100 plus a split group -> only the 1100 event
	evs, next, _ = e.store.FetchTableTriggerDDLEvents(snapTs, 3)
	if len(evs) != 1 || next != 1100 {
		t.Fatalf("cut before group: %d events next %d", len(evs), next)
	}
	// walking the cursor with a small limit visits every event once
	e.resolve(1300)
	var seen []int64
	cur := uint64(snapTs)
	for i := 0; i < 20 && cur < 1300; i++ {
		evs, next, err := e.store.FetchTableTriggerDDLEvents(cur, 1)
		if err != nil || next < cur {
			t.Fatalf("cursor walk: %v next %d < %d", err, next, cur)
		}
		for _, ev := range evs {
			seen = append(seen, ev.JobID)
		}
		cur = next
	}
	if len(seen) != 5 || seen[0] != 1 || seen[4] != 5 {
		t.Errorf("cursor walk saw %v", seen)
	}
	// window (start, end]: start = an event's ts excludes it
	evs, _, _ = e.store.FetchTableTriggerDDLEvents(1200, 10)
	if len(evs) != 1 || evs[0].JobID != 5 {
		t.Errorf("window exclusive of start: %v", eventSummaries(evs))
	}
	// a caller ahead of the store gets its own start back, never a regression
	if evs, next, _ := e.store.FetchTableTriggerDDLEvents(5000, 10); evs != nil || next != 5000 {
		t.Errorf("ahead: %v %d", evs, next)
	}
}

// Rules SS60, SS41 (RegisterTable below the GC ts names both), SS30 (ErrBelowGC,
// ErrDropped).
func TestGCRetention(t *testing.T) {
	e := baseEnv(t)
	e.apply(1100, withTable(job(1, model.ActionAddColumn, 10, 20, 2), tbl(20, "t", 3)))
	e.apply(1200, withTable(job(2, model.ActionAddColumn, 10, 20, 3), tbl(20, "t", 4)))
	e.apply(1300, withTable(job(3, model.ActionDropTable, 10, 30, 4), withParts(tbl(30, "pt", 1), 31, 32, 33)))
	e.apply(1400, withTable(job(4, model.ActionAddColumn, 10, 20, 5), tbl(20, "t", 5)))
	if err := e.store.GC(9999); !errors.Is(err, ErrBadInput) {
		t.Errorf("GC above resolved: %v", err)
	}
	if err := e.store.GC(1250); err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		if _, err := e.store.GetTableInfo(20, 1249); !errors.Is(err, ErrBelowGC) {
			t.Errorf("below GC: %v", err)
		}
		var le *LookupError
		_, err := e.store.GetTableInfo(20, 1000)
		if !errors.As(err, &le) || !le.GCBoundary() || !strings.Contains(err.Error(), "1250") {
			t.Errorf("GC error text: %v", err)
		}
		// the version valid at the GC ts survives
		if colNames(e.info(20, 1250)) != "id,c1,c2,c3,c4" || colNames(e.info(20, 1400)) != "id,c1,c2,c3,c4,c5" {
			t.Error("versions at/above GC ts")
		}
		if _, err := e.store.GetTableInfo(31, 1300); !errors.Is(err, ErrDropped) {
			t.Errorf("drop after GC: %v", err)
		}
		if e.info(31, 1299).ID != 30 {
			t.Error("partition before drop, above GC")
		}
		if _, _, err := e.store.FetchTableTriggerDDLEvents(1000, 10); !errors.Is(err, ErrBelowGC) {
			t.Errorf("fetch below GC: %v", err)
		}
		evs, _, err := e.store.FetchTableTriggerDDLEvents(1250, 10)
		if err != nil || len(evs) != 2 {
			t.Errorf("fetch above GC: %d %v", len(evs), err)
		}
		var ge *GCError
		if err := e.store.RegisterTable(20, 1200); !errors.As(err, &ge) || ge.GCTs != 1250 || ge.Ts != 1200 {
			t.Errorf("RegisterTable below GC: %v", err)
		}
	}
	check()
	versions := len(e.store.h.physical[20].versions)
	if versions != 2 {
		t.Errorf("table 20 keeps %d versions after GC, want 2", versions)
	}
	e.reopen()
	check()
	// GC is monotonic: a lower ts is a no-op
	if err := e.store.GC(1100); err != nil || e.store.GCTs() != 1250 {
		t.Errorf("lower GC: %v gc %d", err, e.store.GCTs())
	}
}

// fakeSource records subscriptions (rule SS3).
type fakeSource struct {
	subs []fakeSub
}

type fakeSub struct {
	id      uint64
	span    kvevent.Span
	startTs uint64
	c       kvevent.Consumer
}

func (f *fakeSource) Subscribe(_ context.Context, id uint64, span kvevent.Span, startTs uint64, c kvevent.Consumer) error {
	f.subs = append(f.subs, fakeSub{id, span, startTs, c})
	return nil
}
func (f *fakeSource) Run(ctx context.Context) error { <-ctx.Done(); return nil }
func (f *fakeSource) Close() error                  { return nil }

func TestSourceSubscription(t *testing.T) {
	f := newFakeSnapshot()
	f.withSystemTables(t, nil)
	src := &fakeSource{}
	cfg := Config{Dir: t.TempDir(), Snapshot: f, InitialTs: snapTs, Source: src, FollowHistory: true}
	s, _ := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := s.RegisterKeyspace(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if len(src.subs) != 2 || src.subs[0].id != DefaultSubscriptionID || src.subs[1].id != DefaultSubscriptionID+1 {
		t.Fatalf("subscriptions %+v", src.subs)
	}
	want := tablecodec.TableRecordSpan(0, false, 281474976710654)
	if !bytes.Equal(src.subs[0].span.StartKey, want.StartKey) || !bytes.Equal(src.subs[0].span.EndKey, want.EndKey) || src.subs[0].startTs != snapTs {
		t.Errorf("job span %x..%x from %d", src.subs[0].span.StartKey, src.subs[0].span.EndKey, src.subs[0].startTs)
	}
	// deliveries through the subscribed consumer reach the store
	k, v := jobRowJSON(t, serverTable(t, "mysql.tidb_ddl_job"), 1, mustJSON(t, func() *model.Job {
		j := job(1, model.ActionCreateSchema, 12, 0, 2)
		j.BinlogInfo.DBInfo = dbInfo(12, "x")
		return j
	}()))
	src.subs[0].c.ConsumeKV([]kvevent.RawKVEntry{{OpType: kvevent.OpTypePut, Key: k, Value: v, CRTs: 1100}})
	src.subs[0].c.AdvanceResolvedTs(1200)
	src.subs[1].c.AdvanceResolvedTs(1150)
	if s.ResolvedTs() != 1150 {
		t.Errorf("resolved %d, want the minimum over both DDL spans", s.ResolvedTs())
	}
	if evs, _, _ := s.FetchTableTriggerDDLEvents(snapTs, 5); len(evs) != 1 {
		t.Errorf("%d events", len(evs))
	}
	// deliveries after Close are dropped, never a crash
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	src.subs[0].c.ConsumeKV([]kvevent.RawKVEntry{{OpType: kvevent.OpTypePut, Key: k, Value: v, CRTs: 1300}})
	src.subs[0].c.AdvanceResolvedTs(1400)
	if _, err := s.GetTableInfo(1, 1); !errors.Is(err, ErrStopped) {
		t.Errorf("after Close: %v", err)
	}
}

// TestLongHistoryBoundaries covers the binary-search lookup path (more than
// eight versions) at FinishedTs-1, FinishedTs and between versions.
func TestLongHistoryBoundaries(t *testing.T) {
	e := baseEnv(t)
	for i := 1; i <= 20; i++ {
		e.deliver(uint64(1000+10*i), withTable(job(int64(i), model.ActionAddColumn, 10, 20, int64(i+1)), tbl(20, "t", 2+i)))
	}
	e.resolve(2000)
	for i := 1; i <= 20; i++ {
		ts := uint64(1000 + 10*i)
		if n := len(e.info(20, ts).Columns); n != 3+i {
			t.Errorf("at %d: %d columns, want %d", ts, n, 3+i)
		}
		if n := len(e.info(20, ts-1).Columns); n != 2+i {
			t.Errorf("at %d: %d columns, want %d", ts-1, n, 2+i)
		}
		if n := len(e.info(20, ts+5).Columns); n != 3+i {
			t.Errorf("at %d: %d columns, want %d", ts+5, n, 3+i)
		}
	}
}
