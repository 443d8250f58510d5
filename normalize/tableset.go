package normalize

import (
	"fmt"
	"github.com/searchfabric/sfemu/normalize/ddlmap"
	"sort"
	"strconv"
	"strings"

	"github.com/searchfabric/sfemu/minicdc"
)

// TableSetChangedError reports that DDLs changed the physical tables of
// the mirrored logical tables (N34): a truncated table or partition got a
// new id, partitions were added or dropped. The bridge already sent the
// schema requests that map the new partitions (from FinishedTs on, E29)
// and advanced every partition to FinishedTs; the Mini-CDC runtime, whose
// table set is fixed (M6), must be restarted with Tables (resume point:
// ResumePoint over their partitions, which is FinishedTs; next epoch).
// The bridge returns it from a callback, so the runtime stops with it
// wrapped in a *minicdc.FatalError; find it with errors.As.
type TableSetChangedError struct {
	// JobID, Action and Query name the first DDL of the change; Collection
	// the collection it changed.
	JobID      int64
	Action     string
	Query      string
	Collection string
	// FinishedTs is the DDLs' commit ts; every partition's progress was
	// stored at it.
	FinishedTs uint64
	// Added and Dropped are the physical ids mapped and unmapped by the
	// change (all DDLs of the FinishedTs group), sorted.
	Added, Dropped []int64
	// NewTableIDs are every physical id the restarted runtime must follow
	// (its StartConfig.TableIDs), sorted.
	NewTableIDs []int64
	// Tables is the bridge configuration of the restart: one entry per
	// physical id, with the post-DDL schema and the collection binding.
	Tables []Table
}

func (e *TableSetChangedError) Error() string {
	return fmt.Sprintf("normalize: table set changed by DDL job %d (%s) at %d on collection %q: added %v, dropped %v; restart the adapter with tables %v",
		e.JobID, e.Action, e.FinishedTs, e.Collection, e.Added, e.Dropped, e.NewTableIDs)
}

// changesTableSet reports whether ev maps or unmaps physical tables of a
// collection it affects that stays active (N34).
func (b *Bridge) changesTableSet(ev *minicdc.DDL) bool {
	for _, coll := range b.collections {
		if !affects(ev, coll) || coll.appliedBefore(ev.FinishedTs, ev.JobID) || ev.Action.IsDrop() {
			continue
		}
		if v := coll.view(); len(ddlmap.Dropped(ev, v)) > 0 || len(ddlmap.Added(ev, v)) > 0 {
			return true
		}
	}
	return false
}

// noteTableSetChange records (or extends, for another DDL of the same
// FinishedTs group) the pending TableSetChangedError. Caller holds ctl.
func (b *Bridge) noteTableSetChange(ev *minicdc.DDL, coll *collection, added, removed []int64) {
	e := b.tableSet
	if e == nil {
		e = &TableSetChangedError{JobID: ev.JobID, Action: ev.Action.String(), Query: ev.Query,
			Collection: coll.name, FinishedTs: ev.FinishedTs}
		b.tableSet = e
	}
	e.Added = sortedIDs(append(e.Added, added...))
	e.Dropped = sortedIDs(append(e.Dropped, removed...))
	e.NewTableIDs, e.Tables = e.NewTableIDs[:0], e.Tables[:0]
	for _, c := range b.collections {
		if !c.active {
			continue // dropped: nothing left to follow
		}
		for _, p := range c.partitions {
			if p.retired {
				continue
			}
			e.NewTableIDs = append(e.NewTableIDs, p.tableID)
			e.Tables = append(e.Tables, Table{PhysicalID: p.tableID, SchemaID: c.schemaID, Database: c.source.Database,
				Info: c.info, Collection: c.name})
		}
	}
	sort.Slice(e.Tables, func(i, j int) bool { return e.Tables[i].PhysicalID < e.Tables[j].PhysicalID })
	e.NewTableIDs = sortedIDs(e.NewTableIDs)
}

func sortedIDs(ids []int64) []int64 {
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// PendingTableSetChange returns the table-set change found by a DDL and
// not yet reported, or nil.
func (b *Bridge) PendingTableSetChange() *TableSetChangedError {
	b.ctl.Lock()
	defer b.ctl.Unlock()
	return b.tableSet
}

// partitionID parses the physical id out of a source partition name (N1).
func partitionID(name string) (int64, bool) {
	i := strings.LastIndex(name, "table:")
	if i < 0 {
		return 0, false
	}
	id, err := strconv.ParseInt(name[i+len("table:"):], 10, 64)
	return id, err == nil && id > 0
}
