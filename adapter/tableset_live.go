package adapter

// The live table set (specs/tableset.md LT1-LT5): the adapter follows
// tables joining and leaving while it runs, changing the runtime's set in
// place (minicdc M50-M54) instead of restarting.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/normalize"
	"github.com/searchfabric/sfemu/tablefilter"
	"github.com/searchfabric/sfemu/upstream/pd"
	"github.com/searchfabric/sfemu/upstream/schemastore"
)

// liveSet wraps the callback chain: after each DDL reached the bridge it
// decides whether the followed set changes, and applies the change to the
// bridge and the runtime before the runtime considers the next DDL.
type liveSet struct {
	next   minicdc.Callback
	bridge *normalize.Bridge
	up     *Upstream
	filter *tablefilter.Filter // nil: a fixed list, no pickup by name
	log    io.Writer
	rt     atomic.Pointer[minicdc.Runtime]
	// started is closed once rt is set: the control loop may deliver a
	// DDL before minicdc.Start returned.
	started chan struct{}

	mu       sync.Mutex
	followed map[int64]followedTable // physical id → table
	// detached are the physical ids renamed out of the filter or removed
	// in this run, with the collection kept for them (LT3).
	detached map[int64]string
	// snaps are the snapshots of joining tables running now (LT6).
	snaps []*addSnapshot
	// ddlWaiting counts DDLs waiting in OnDDL for a snapshot (LT9).
	ddlWaiting atomic.Int32

	// add lets joining tables with rows be snapshotted (nil: not).
	add *addRuntime
	wg  sync.WaitGroup // the snapshots' goroutines
}

// followedTable is what the live set knows of a followed physical table.
type followedTable struct {
	db, table  string // names as the table is now
	collection string
	logicalID  int64
}

func newLiveSet(next minicdc.Callback, bridge *normalize.Bridge, up *Upstream, filter *tablefilter.Filter, log io.Writer, tables []normalize.Table) *liveSet {
	if log == nil {
		log = io.Discard
	}
	l := &liveSet{next: next, bridge: bridge, up: up, filter: filter, log: log, followed: map[int64]followedTable{}, detached: map[int64]string{}, started: make(chan struct{})}
	for _, t := range tables {
		l.followed[t.PhysicalID] = followedTable{db: t.Database, table: t.Info.Name.O, collection: t.Collection, logicalID: t.Info.ID}
	}
	return l
}

// attach hands the started runtime to the live set.
func (l *liveSet) attach(rt *minicdc.Runtime) {
	l.rt.Store(rt)
	close(l.started)
}

func (l *liveSet) OnRowChanged(ctx context.Context, ev minicdc.RowChanged) error {
	return l.next.OnRowChanged(ctx, ev)
}

func (l *liveSet) OnCheckpoint(ctx context.Context, cp minicdc.Checkpoint) error {
	return l.next.OnCheckpoint(ctx, cp)
}

func (l *liveSet) OnDDL(ctx context.Context, ev minicdc.DDL) error {
	// A DDL of a joining table waits for its snapshot (LT6, LT9).
	if err := l.waitAdds(ctx, &ev); err != nil {
		return err
	}
	if err := l.next.OnDDL(ctx, ev); err != nil {
		return err
	}
	if err := l.afterDDL(ctx, &ev); err != nil {
		return fmt.Errorf("adapter: following the table set after DDL job %d (%s) at %d: %w", ev.JobID, ev.Action, ev.FinishedTs, err)
	}
	return nil
}

// afterDDL applies what ev does to the followed set (LT1-LT3).
func (l *liveSet) afterDDL(ctx context.Context, ev *minicdc.DDL) error {
	select {
	case <-l.started:
	case <-ctx.Done():
		return ctx.Err()
	}
	rt := l.rt.Load()
	T := ev.FinishedTs
	// TRUNCATE TABLE and partition DDLs give a mirrored table new physical
	// ids: the bridge mapped them; follow them here (LT2).
	if ch := l.bridge.TakeTableSetChange(); ch != nil {
		add, remove := netChange(ch.Added, ch.Dropped)
		remove = l.onlyFollowed(remove)
		if err := rt.ChangeTablesInDDL(minicdc.TableChange{Add: add, Remove: remove, StartTs: T}); err != nil {
			return err
		}
		l.mu.Lock()
		for _, id := range remove {
			delete(l.followed, id)
		}
		for _, t := range ch.Tables {
			if contains(add, t.PhysicalID) {
				l.followed[t.PhysicalID] = followedTable{db: t.Database, table: t.Info.Name.O, collection: t.Collection, logicalID: t.Info.ID}
			}
		}
		l.mu.Unlock()
		fmt.Fprintf(l.log, "sfemu: DDL job %d (%s) at ts %d changed the tables of collection %q: following %v, no longer %v (no restart)\n",
			ch.JobID, ch.Action, T, ch.Collection, add, remove)
	}
	switch {
	case ev.Action.IsDrop():
		// The bridge dropped the collections (N29); stop following (LT3).
		remove := l.onlyFollowed(ev.DroppedTableIDs)
		if ev.Action == minicdc.ActionDropSchema {
			remove = append(remove, l.followedIn(ev.SchemaName)...)
		}
		remove = dedupe(remove)
		if len(remove) == 0 {
			return nil
		}
		if err := rt.ChangeTablesInDDL(minicdc.TableChange{Remove: remove, StartTs: T}); err != nil {
			return err
		}
		l.forget(remove)
		fmt.Fprintf(l.log, "sfemu: DDL job %d (%s) at ts %d dropped physical tables %v: no longer followed, their collections dropped\n", ev.JobID, ev.Action, T, remove)
	case ev.Action == minicdc.ActionCreateTable || ev.Action == minicdc.ActionCreateTables || ev.Action == minicdc.ActionRecoverTable:
		created := ev.MultipleTables
		if ev.Table != nil {
			created = []*minicdc.TableInfo{ev.Table}
		}
		for _, ti := range created {
			// A recovered table has its rows back: they are copied (LT6).
			if err := l.join(rt, ev.SchemaName, ev.SchemaID, ti, T, "created", ev.Action == minicdc.ActionRecoverTable); err != nil {
				return err
			}
		}
	case ev.Action == minicdc.ActionRenameTable && l.filter != nil && ev.Table != nil:
		return l.renamed(rt, ev, renameOf{db: ev.SchemaName, dbID: ev.SchemaID, ti: ev.Table, oldDB: ev.OldSchemaName, oldTable: ev.OldTableName})
	case ev.Action == minicdc.ActionRenameTables && l.filter != nil:
		// RENAME TABLE a TO b, c TO d: each table as its own rename, in
		// the statement's order (LT7).
		rs, err := l.renamesOf(ctx, ev)
		if err != nil {
			return err
		}
		for _, r := range rs {
			if err := l.renamed(rt, ev, r); err != nil {
				return err
			}
		}
	}
	return nil
}

// renameOf is one table of a RENAME TABLE(S): its post-DDL definition and
// names, and the names before.
type renameOf struct {
	db       string
	dbID     int64
	ti       *minicdc.TableInfo
	oldDB    string
	oldTable string
}

// renamesOf lists the tables of a multi-table rename: MultipleTables and
// the name change's Added/Dropped pairs are in the statement's order; the
// new database's id is read at the DDL's ts.
func (l *liveSet) renamesOf(ctx context.Context, ev *minicdc.DDL) ([]renameOf, error) {
	nc := ev.NameChange
	if nc == nil || len(nc.Added) != len(ev.MultipleTables) || len(nc.Dropped) != len(ev.MultipleTables) {
		return nil, fmt.Errorf("RENAME TABLES job %d: %d tables but name change %+v", ev.JobID, len(ev.MultipleTables), nc)
	}
	var out []renameOf
	for i, ti := range ev.MultipleTables {
		to, from := nc.Added[i], nc.Dropped[i]
		if !strings.EqualFold(to.Table, ti.Name.O) {
			return nil, fmt.Errorf("RENAME TABLES job %d: table %d is %s, its new name %s.%s", ev.JobID, ti.ID, ti.Name.O, to.Schema, to.Table)
		}
		_, dbID, err := schemastore.LookupTable(ctx, l.up.Snapshot(), ev.FinishedTs, to.Schema, to.Table)
		if err != nil {
			return nil, fmt.Errorf("RENAME TABLES job %d: %s.%s at %d: %w", ev.JobID, to.Schema, to.Table, ev.FinishedTs, err)
		}
		out = append(out, renameOf{db: to.Schema, dbID: dbID, ti: ti, oldDB: from.Schema, oldTable: from.Table})
	}
	return out, nil
}

// renamed applies one table's rename to the followed set (LT1, LT3).
func (l *liveSet) renamed(rt *minicdc.Runtime, ev *minicdc.DDL, r renameOf) error {
	T := ev.FinishedTs
	ids := r.ti.PhysicalIDs()
	following := len(l.onlyFollowed(ids)) > 0
	matches := l.filter.Match(r.db, r.ti.Name.O)
	switch {
	case following && !matches:
		// Renamed out of the filter: stop, keep the collection (LT3).
		names, err := l.bridge.DetachTables(ids)
		if err != nil {
			return err
		}
		if err := rt.ChangeTablesInDDL(minicdc.TableChange{Remove: ids, StartTs: T}); err != nil {
			return err
		}
		l.forget(ids)
		l.markDetached(ids, names)
		fmt.Fprintf(l.log, "sfemu: DDL job %d at ts %d renamed %s.%s to %s.%s, outside --tables %q: no longer followed; collection(s) %v kept as of ts %d\n",
			ev.JobID, T, r.oldDB, r.oldTable, r.db, r.ti.Name.O, l.filter, names, T)
	case !following && matches:
		// Renamed into the filter: follow from the rename on, its rows
		// at the rename copied first (LT1, LT6).
		return l.join(rt, r.db, r.dbID, r.ti, T, "renamed into the filter", true)
	case following:
		l.mu.Lock()
		for _, id := range ids {
			f := l.followed[id]
			if f.collection == "" { // the collection keeps its name (N3)
				f.collection = normalize.DefaultCollectionName(f.db, f.table)
			}
			f.db, f.table = r.db, r.ti.Name.O
			l.followed[id] = f
		}
		l.mu.Unlock()
	}
	return nil
}

// join starts following a table that appeared at T (LT1): collection
// `<db>.<table>` created at T, subscription from T; with copy (a table
// that may hold rows), its rows at T are snapshotted (LT6).
func (l *liveSet) join(rt *minicdc.Runtime, db string, dbID int64, ti *minicdc.TableInfo, T uint64, why string, copy bool) error {
	if l.filter == nil || ti == nil || !l.filter.Match(db, ti.Name.O) {
		return nil
	}
	ids := ti.PhysicalIDs()
	if len(l.onlyFollowed(ids)) > 0 {
		return nil // already followed (a start set resolved after this DDL)
	}
	if coll := l.detachedCollection(ids); coll != "" {
		// Its kept collection maps these partitions and missed what
		// happened while the table was out: it is not resumed (LT3).
		fmt.Fprintf(l.log, "sfemu: table %s.%s %s at ts %d matches --tables %q, but collection %q kept from before maps its physical tables %v: not followed; drop that collection and add the table through POST /admin/tables to mirror it again\n",
			db, ti.Name.O, why, T, l.filter, coll, ids)
		return nil
	}
	tables := make([]normalize.Table, len(ids))
	for i, id := range ids {
		tables[i] = normalize.Table{PhysicalID: id, SchemaID: dbID, Database: db, Info: ti}
	}
	copy = copy && l.add != nil
	var hold *pd.Hold
	if copy {
		var err error
		if hold, err = l.holdAt(db+"."+ti.Name.O, T); err != nil {
			return err
		}
	}
	stopHold := func() {
		if hold != nil {
			_ = hold.Stop(true)
		}
	}
	if err := l.bridge.AddTables(context.Background(), tables, T); err != nil {
		stopHold()
		var exists *normalize.CollectionExistsError
		if errors.As(err, &exists) {
			fmt.Fprintf(l.log, "sfemu: table %s.%s %s at ts %d matches --tables %q, but %v: not followed\n", db, ti.Name.O, why, T, l.filter, err)
			return nil
		}
		return err
	}
	var snap *addSnapshot
	if copy {
		var err error
		if snap, err = l.startAdd(db+"."+ti.Name.O, normalize.DefaultCollectionName(db, ti.Name.O), ti.ID, ids, T, hold); err != nil {
			stopHold()
			return err
		}
	}
	if err := rt.ChangeTablesInDDL(minicdc.TableChange{Add: ids, StartTs: T}); err != nil {
		if snap != nil {
			l.finishAdd(snap, err)
		}
		return err
	}
	l.remember(tables)
	if snap != nil {
		l.wg.Add(1)
		go l.runAdd(snap)
	}
	fmt.Fprintf(l.log, "sfemu: table %s.%s %s at ts %d matches --tables %q: following physical tables %v from ts %d into collection %q%s\n",
		db, ti.Name.O, why, T, l.filter, ids, T, normalize.DefaultCollectionName(db, ti.Name.O), map[bool]string{true: ", its rows at that ts copied first"}[snap != nil])
	return nil
}

func (l *liveSet) remember(tables []normalize.Table) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, t := range tables {
		l.followed[t.PhysicalID] = followedTable{db: t.Database, table: t.Info.Name.O, collection: t.Collection, logicalID: t.Info.ID}
	}
}

func (l *liveSet) markDetached(ids []int64, collections []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		l.detached[id] = strings.Join(collections, ",")
	}
}

func (l *liveSet) detachedCollection(ids []int64) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		if c, ok := l.detached[id]; ok {
			return c
		}
	}
	return ""
}

func (l *liveSet) forget(ids []int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		delete(l.followed, id)
	}
}

func (l *liveSet) onlyFollowed(ids []int64) []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int64
	for _, id := range ids {
		if _, ok := l.followed[id]; ok {
			out = append(out, id)
		}
	}
	return out
}

func (l *liveSet) followedIn(db string) []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int64
	for id, f := range l.followed {
		if strings.EqualFold(f.db, db) {
			out = append(out, id)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Tables returns the followed tables as refs (one per logical table),
// sorted: what /admin/check and the status show.
func (l *liveSet) Tables() []TableRef {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := map[int64]bool{}
	var out []TableRef
	for _, f := range l.followed {
		if seen[f.logicalID] {
			continue
		}
		seen[f.logicalID] = true
		out = append(out, TableRef{DB: f.db, Table: f.table, Collection: f.collection})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// idsOf returns the followed physical ids of the table db.table.
func (l *liveSet) idsOf(db, table string) []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int64
	for id, f := range l.followed {
		if strings.EqualFold(f.db, db) && strings.EqualFold(f.table, table) {
			out = append(out, id)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// netChange drops ids both added and dropped by one change.
func netChange(added, dropped []int64) (add, remove []int64) {
	for _, id := range added {
		if !contains(dropped, id) {
			add = append(add, id)
		}
	}
	for _, id := range dropped {
		if !contains(added, id) {
			remove = append(remove, id)
		}
	}
	return add, remove
}

func contains(ids []int64, id int64) bool {
	for _, v := range ids {
		if v == id {
			return true
		}
	}
	return false
}

func dedupe(ids []int64) []int64 {
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	out := ids[:0]
	for i, id := range ids {
		if i == 0 || id != ids[i-1] {
			out = append(out, id)
		}
	}
	return out
}

// AddTable starts mirroring db.table of the running adapter's cluster
// from now (LT5, LT6, POST /admin/tables): the table joins at the ts S
// the runtime fixes (the TSO), its collection `<db>.<table>` is created
// there, the rows it holds at S are copied in the background (WaitAdded
// waits for it) and every change committed after S is mirrored after
// them. It returns once the table is followed.
func (a *Adapter) AddTable(ctx context.Context, db, table string) ([]int64, error) {
	l := a.live
	if ids := l.idsOf(db, table); len(ids) > 0 {
		return nil, fmt.Errorf("adapter: table %s.%s is already mirrored (physical tables %v)", db, table, ids)
	}
	var tables []normalize.Table
	// The table's physical ids are needed before the runtime fixes the ts:
	// read them now; Prepare re-reads the definition at the fixed ts.
	now, err := l.up.CurrentTs(ctx)
	if err != nil {
		return nil, fmt.Errorf("adapter: adding %s.%s: current ts: %w", db, table, err)
	}
	ti, _, err := schemastore.LookupTable(ctx, l.up.Snapshot(), now, db, table)
	if err != nil {
		return nil, fmt.Errorf("adapter: adding %s.%s: %w", db, table, err)
	}
	ids := minicdc.NewTableInfo(ti).PhysicalIDs()
	var snap *addSnapshot
	err = a.RT.ChangeTables(ctx, minicdc.TableChange{Add: ids, Prepare: func(ts uint64) error {
		at, dbID, err := schemastore.LookupTable(ctx, l.up.Snapshot(), ts, db, table)
		if err != nil {
			return fmt.Errorf("adapter: adding %s.%s at %d: %w", db, table, ts, err)
		}
		info := minicdc.NewTableInfo(at)
		if fmt.Sprint(info.PhysicalIDs()) != fmt.Sprint(ids) {
			return fmt.Errorf("adapter: adding %s.%s: its physical tables changed from %v to %v while it was added; retry", db, table, ids, info.PhysicalIDs())
		}
		tables = make([]normalize.Table, len(ids))
		for i, id := range ids {
			tables[i] = normalize.Table{PhysicalID: id, SchemaID: dbID, Database: db, Info: info}
		}
		// GC is held at S before anything reads at it (LT6).
		hold, err := l.holdAt(db+"."+at.Name.O, ts)
		if err != nil {
			return err
		}
		if err := a.Bridge.AddTables(ctx, tables, ts); err != nil {
			if hold != nil {
				_ = hold.Stop(true)
			}
			return err
		}
		snap, err = l.startAdd(db+"."+at.Name.O, a.Bridge.CollectionOf(ids[0]), at.ID, ids, ts, hold)
		if err != nil && hold != nil {
			_ = hold.Stop(true)
		}
		return err
	}})
	if err != nil {
		if snap != nil {
			l.finishAdd(snap, err)
		}
		return nil, err
	}
	l.remember(tables)
	l.wg.Add(1)
	go l.runAdd(snap)
	return ids, nil
}

// RemoveTable stops mirroring db.table (LT5, DELETE through
// /admin/tables): like a rename out of the filter, the collection is kept
// as of the last checkpoint (LT3).
func (a *Adapter) RemoveTable(ctx context.Context, db, table string) ([]int64, error) {
	l := a.live
	ids := l.idsOf(db, table)
	if len(ids) == 0 {
		return nil, fmt.Errorf("adapter: table %s.%s is not mirrored (mirrored: %v)", db, table, l.Tables())
	}
	var names []string
	err := a.RT.ChangeTables(ctx, minicdc.TableChange{Remove: ids, Prepare: func(uint64) error {
		var err error
		names, err = a.Bridge.DetachTables(ids)
		return err
	}})
	if err != nil {
		return nil, err
	}
	l.forget(ids)
	l.markDetached(ids, names)
	return ids, nil
}

// MirroredTables returns the tables followed now (one ref per logical
// table), sorted.
func (a *Adapter) MirroredTables() []TableRef { return a.live.Tables() }
