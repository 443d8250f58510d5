package adapter

// A table that joins the running adapter with rows already in it
// (specs/tableset.md LT6): POST /admin/tables, a RENAME into the filter,
// RECOVER TABLE. The table joins the runtime at S (the join ts); in the
// same step GC is held at S, the collection created at S and the bridge
// holds the table's partitions; the rows read at S are then ingested in
// the background into the bridge's epoch (seqs from 1) while the stream's
// rows above S wait in the reorder buffer; the bridge then releases them
// with the next seqs. A DDL waits for the running snapshots before it
// reaches the bridge, so the snapshot rows are read and applied with the
// schema at S.

import (
	"context"
	"fmt"
	"strings"

	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/normalize"
	"github.com/searchfabric/sfemu/snapshot"
	"github.com/searchfabric/sfemu/upstream/pd"
)

// addSnapshot is one joining table's snapshot.
type addSnapshot struct {
	name    string // db.table at S
	coll    string
	logical int64 // the table's id (its physical ids are ids)
	ids     []int64
	ts      uint64
	held    []normalize.HeldPartition
	ends    []normalize.SnapshotEnd
	hold    *pd.Hold
	done    chan struct{}
	rows    uint64
	err     error
}

// addRuntime is what the live set needs to snapshot a joining table; it
// is set by startWithTables (nil: joins are not snapshotted, as in
// library uses that build a live set by hand).
type addRuntime struct {
	ctx  context.Context
	up   *Upstream
	sink normalize.Sink
	cfg  Config
}

// beginAdd registers the snapshot of a table that joins at ts, before the
// runtime subscribes it (Prepare, or inside OnDDL): GC held at ts, then
// the bridge's hold of its partitions. Collection creation is the
// caller's (Bridge.AddTables) and comes between hold and partitions.
func (l *liveSet) holdAt(name string, ts uint64) (*pd.Hold, error) {
	ar := l.add
	gc := ar.cfg.GC
	gc.ServiceID = gc.ServiceID + "-add-" + strings.ToLower(name)
	return holdGC(ar.ctx, ar.up, gc, ts)
}

// startAdd records the joining table's snapshot (the partitions already
// added to the bridge) and holds its partitions; the caller runs it with
// runAdd once the runtime follows the table.
func (l *liveSet) startAdd(name, coll string, logical int64, ids []int64, ts uint64, hold *pd.Hold) (*addSnapshot, error) {
	held, err := l.bridge.HoldPartitions(ids)
	if err != nil {
		return nil, err
	}
	s := &addSnapshot{name: name, coll: coll, logical: logical, ids: ids, ts: ts, held: held, hold: hold, done: make(chan struct{})}
	if err := markAdd(l.add.cfg.DataDir, addMark{Table: name, Collection: coll, Ts: ts}); err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.snaps = append(l.snaps, s)
	l.mu.Unlock()
	return s, nil
}

// runAdd reads the table at S and hands the partitions back to the
// stream (LT6). It runs in the background (the adapter's wait group).
func (l *liveSet) runAdd(s *addSnapshot) {
	ar := l.add
	defer l.wg.Done()
	err := l.snapshotAdded(s)
	if err == nil {
		err = l.bridge.ReleasePartitions(ar.ctx, s.ends)
	}
	if err == nil {
		fmt.Fprintf(l.log, "sfemu: snapshot of %s at ts %d done: %d rows in collection %q; following its stream (no restart)\n", s.name, s.ts, s.rows, s.coll)
		l.finishAdd(s, nil)
		return
	}
	err = fmt.Errorf("adapter: snapshot of added table %s at ts %d: %w", s.name, s.ts, err)
	// Stop the table first (its collection receives nothing more), so the
	// DDLs waiting for the snapshot go on; then drop what it wrote.
	_, derr := l.bridge.DetachTables(s.ids)
	l.finishAdd(s, err)
	if ar.ctx.Err() != nil || derr != nil {
		// Closing: the mark stays, the next start drops the collection.
		return
	}
	if rt := l.rt.Load(); rt != nil {
		_ = rt.ChangeTables(ar.ctx, removeChange(s.ids))
	}
	l.forget(s.ids)
	if err := dropCollections(ar.ctx, ar.sink, []string{s.coll}, s.ts, ar.cfg.ClientID); err == nil {
		_ = unmarkAdd(ar.cfg.DataDir, s.coll)
	}
	fmt.Fprintf(l.log, "sfemu: %v: table no longer followed, collection %q dropped; add it again\n", err, s.coll)
}

// snapshotAdded reads s's physical tables at S into the held partitions.
func (l *liveSet) snapshotAdded(s *addSnapshot) error {
	ar := l.add
	db, table, _ := strings.Cut(s.name, ".")
	tables, err := resolveTablesAt(ar.ctx, ar.up, []TableRef{{DB: db, Table: table, Collection: s.coll}}, s.ts)
	if err != nil {
		return err
	}
	st := &snapshot.State{Version: snapshot.StateVersion, Ts: s.ts, Epoch: s.held[0].Epoch}
	for _, t := range tables {
		rs, err := planRanges(ar.ctx, ar.up, t.table.PhysicalID)
		if err != nil {
			return err
		}
		st.Tables = append(st.Tables, snapshot.Table{Name: s.name, Collection: s.coll, PhysicalID: t.table.PhysicalID, Ranges: rs})
	}
	w, err := newSnapWriter(ar.ctx, ar.sink, ar.cfg.Bridge, tables, s.ts, st.Epoch)
	if err != nil {
		return err
	}
	sc := ar.cfg.Snapshot
	err = snapshot.Run(ar.ctx, st, snapshot.Config{Reader: ar.up.Snapshot(), Writer: w, Concurrency: sc.Concurrency, ChunkRows: sc.ChunkRows,
		Quota: ar.cfg.Memory.Quota, Progress: sc.Progress, AfterChunk: sc.AfterChunk})
	if err != nil {
		return err
	}
	byID := map[int64]int{}
	for i, t := range st.Tables {
		byID[t.PhysicalID] = i
		s.rows += t.Rows()
	}
	s.ends = s.ends[:0]
	for _, h := range s.held {
		j, ok := byID[h.PhysicalID]
		if !ok {
			return fmt.Errorf("physical table %d is not %s's at ts %d", h.PhysicalID, s.name, s.ts)
		}
		e := normalize.SnapshotEnd{PhysicalID: h.PhysicalID, NextSeq: w.parts[j].NextSeq()}
		if st.Tables[j].Rows() > 0 {
			e.Stored = s.ts // FinishTable stored S (N43)
		}
		s.ends = append(s.ends, e)
	}
	return nil
}

// finishAdd ends s: DDLs waiting for it go on, its GC hold is removed
// (a restart does not resume it, LT6), and a completed one is unmarked.
func (l *liveSet) finishAdd(s *addSnapshot, err error) {
	s.err = err
	l.mu.Lock()
	for i, o := range l.snaps {
		if o == s {
			l.snaps = append(l.snaps[:i], l.snaps[i+1:]...)
			break
		}
	}
	l.mu.Unlock()
	close(s.done)
	if s.hold != nil {
		_ = s.hold.Stop(true)
	}
	if err == nil {
		_ = unmarkAdd(l.add.cfg.DataDir, s.coll)
	}
}

// waitAdds blocks until every running snapshot of a joining table that
// ev may touch ended (LT6, LT9): such a DDL reaches the bridge only then,
// so no schema change lands between a snapshot's rows (read with the
// schema at S) and the stream's. A DDL of other tables goes on at once
// (the bridge's flush skips held partitions, N34), so copies do not stall
// checkpoints.
func (l *liveSet) waitAdds(ctx context.Context, ev *minicdc.DDL) error {
	l.mu.Lock()
	var running []*addSnapshot
	for _, s := range l.snaps {
		if ddlTouchesCopy(ev, s) {
			running = append(running, s)
		}
	}
	l.mu.Unlock()
	if len(running) == 0 {
		return nil
	}
	l.ddlWaiting.Add(1)
	defer l.ddlWaiting.Add(-1)
	for _, s := range running {
		select {
		case <-s.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// WaitAdded waits for the snapshot of an added table (db.table as added)
// to end and returns its rows and error; (0, nil) when none runs.
func (a *Adapter) WaitAdded(ctx context.Context, db, table string) (uint64, error) {
	name := strings.ToLower(db + "." + table)
	a.live.mu.Lock()
	var s *addSnapshot
	for _, o := range a.live.snaps {
		if strings.ToLower(o.name) == name {
			s = o
		}
	}
	a.live.mu.Unlock()
	if s == nil {
		return 0, nil
	}
	select {
	case <-s.done:
		return s.rows, s.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func removeChange(ids []int64) minicdc.TableChange { return minicdc.TableChange{Remove: ids} }
