package schemastore

import (
	"sort"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
)

// tableVersion is one entry of a physical table's history.
type tableVersion struct {
	// ts is the FinishedTs of the DDL that produced the version, or the
	// snapshot/GC base ts for versions that did not come from a DDL.
	ts uint64
	// ver is the SchemaVersion of that DDL (0 for snapshot/GC-base
	// versions); it orders versions with equal ts.
	ver       int64
	logicalID int64
	schemaID  int64
	// info is the logical table's public TableInfo (shared, read-only,
	// never used by the store's own derivations); nil marks a drop.
	info *model.TableInfo
	// fromDDL is false for snapshot and GC-base versions.
	fromDDL bool
}

// physTable is the version list of one physical table id, ascending by ts.
type physTable struct {
	versions []tableVersion
}

// tableState is a live logical table. info is the store's private copy: it
// is what later DDLs are derived from, and it is never handed out.
type tableState struct {
	schemaID int64
	info     *model.TableInfo
}

// jobPos orders applied jobs: (FinishedTs, SchemaVersion).
type jobPos struct {
	ts  uint64
	ver int64
}

func (a jobPos) less(b jobPos) bool {
	if a.ts != b.ts {
		return a.ts < b.ts
	}
	return a.ver < b.ver
}

// history is the pure in-memory schema history: no I/O, no clock, not safe
// for concurrent use (the Store guards it).
type history struct {
	gcTs       uint64
	resolvedTs uint64
	last       jobPos

	dbs      map[int64]*model.DBInfo // private copies
	tables   map[int64]*tableState   // live logical tables
	physical map[int64]*physTable
	events   []DDLEvent // ascending by (FinishedTs, SchemaVersion)
}

func newHistory() *history {
	return &history{
		dbs:      map[int64]*model.DBInfo{},
		tables:   map[int64]*tableState{},
		physical: map[int64]*physTable{},
	}
}

// lookup returns the TableInfo valid at ts for a physical table id.
func (h *history) lookup(tableID int64, ts uint64) (*model.TableInfo, error) {
	if ts < h.gcTs {
		return nil, &LookupError{Kind: ErrBelowGC, TableID: tableID, Ts: ts, ResolvedTs: h.resolvedTs, GCTs: h.gcTs}
	}
	if ts > h.resolvedTs {
		return nil, &LookupError{Kind: ErrNotReady, TableID: tableID, Ts: ts, ResolvedTs: h.resolvedTs, GCTs: h.gcTs}
	}
	p := h.physical[tableID]
	if p == nil || len(p.versions) == 0 {
		return nil, &LookupError{Kind: ErrUnknownTable, TableID: tableID, Ts: ts, ResolvedTs: h.resolvedTs, GCTs: h.gcTs}
	}
	vs := p.versions
	// Newest version with version ts <= ts. Linear from the end: the hot
	// path asks for recent ts, and most tables have few versions.
	i := len(vs) - 1
	if len(vs) > 8 {
		lo, hi := 0, len(vs) // first index with version ts > ts
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if vs[m].ts > ts {
				hi = m
			} else {
				lo = m + 1
			}
		}
		i = lo - 1
	} else {
		for i >= 0 && vs[i].ts > ts {
			i--
		}
	}
	if i < 0 {
		return nil, &LookupError{Kind: ErrNotYetCreated, TableID: tableID, Ts: ts, ResolvedTs: h.resolvedTs, GCTs: h.gcTs, CreatedTs: vs[0].ts}
	}
	if vs[i].info == nil {
		return nil, &LookupError{Kind: ErrDropped, TableID: tableID, Ts: ts, ResolvedTs: h.resolvedTs, GCTs: h.gcTs, DroppedTs: vs[i].ts}
	}
	return vs[i].info, nil
}

// maxEventTs is the FinishedTs of the newest DDL (at or below limit) that
// touched the physical table.
func (h *history) maxEventTs(tableID int64, limit uint64) uint64 {
	p := h.physical[tableID]
	if p == nil {
		return 0
	}
	for i := len(p.versions) - 1; i >= 0; i-- {
		v := p.versions[i]
		if v.fromDDL && v.ts <= limit {
			return v.ts
		}
	}
	return 0
}

// eventsAfter returns the index of the first event with FinishedTs > ts.
func (h *history) eventsAfter(ts uint64) int {
	return sort.Search(len(h.events), func(i int) bool { return h.events[i].FinishedTs > ts })
}

// addVersion appends a version to a physical table's list.
func (h *history) addVersion(physID int64, v tableVersion, ch *changeSet) {
	p := h.physical[physID]
	if p == nil {
		p = &physTable{}
		h.physical[physID] = p
	}
	p.versions = append(p.versions, v)
	ch.versions = append(ch.versions, versionRecord{physID: physID, v: v})
}

// liveTablesOf lists the live logical tables of a schema, ascending by id.
func (h *history) liveTablesOf(schemaID int64) []int64 {
	var ids []int64
	for id, t := range h.tables {
		if t.schemaID == schemaID {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// gc drops versions no lookup at ts >= gcTs can reach and events with
// FinishedTs <= gcTs. It returns what to delete from persistence.
func (h *history) gc(gcTs uint64) gcChanges {
	var out gcChanges
	if gcTs <= h.gcTs {
		return out
	}
	h.gcTs = gcTs
	for id, p := range h.physical {
		vs := p.versions
		// keep the newest version <= gcTs and everything after it
		i := sort.Search(len(vs), func(k int) bool { return vs[k].ts > gcTs }) - 1
		if i <= 0 {
			continue
		}
		for _, v := range vs[:i] {
			out.versions = append(out.versions, versionKey(id, v.ts, v.ver))
		}
		p.versions = append([]tableVersion(nil), vs[i:]...)
	}
	n := h.eventsAfter(gcTs)
	for _, e := range h.events[:n] {
		out.events = append(out.events, eventKey(e.FinishedTs, e.SchemaVersion, e.JobID))
	}
	h.events = append([]DDLEvent(nil), h.events[n:]...)
	return out
}

// gcChanges lists persisted keys GC removes.
type gcChanges struct {
	versions [][]byte
	events   [][]byte
}

// versionRecord is a new version to persist.
type versionRecord struct {
	physID int64
	v      tableVersion
}

// changeSet is what one batch of applied jobs changed, for persistence.
type changeSet struct {
	dbPut     map[int64]*model.DBInfo
	dbDel     map[int64]bool
	tablePut  map[int64]*tableState
	tableDel  map[int64]bool
	versions  []versionRecord
	events    []DDLEvent
	last      jobPos
	lastSet   bool
	processed int
}

func newChangeSet() *changeSet {
	return &changeSet{
		dbPut:    map[int64]*model.DBInfo{},
		dbDel:    map[int64]bool{},
		tablePut: map[int64]*tableState{},
		tableDel: map[int64]bool{},
	}
}

func (c *changeSet) putDB(d *model.DBInfo) { c.dbPut[d.ID] = d; delete(c.dbDel, d.ID) }
func (c *changeSet) delDB(id int64)        { c.dbDel[id] = true; delete(c.dbPut, id) }
func (c *changeSet) putTable(id int64, t *tableState) {
	c.tablePut[id] = t
	delete(c.tableDel, id)
}
func (c *changeSet) delTable(id int64) { c.tableDel[id] = true; delete(c.tablePut, id) }

// referencedInfos is the set of tinfo keys some version points at.
func (h *history) referencedInfos() map[string]bool {
	refs := map[string]bool{}
	for _, p := range h.physical {
		for _, v := range p.versions {
			if v.info != nil {
				refs[string(tinfoKey(v.logicalID, v.ts, v.ver))] = true
			}
		}
	}
	return refs
}
