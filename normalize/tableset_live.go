package normalize

import (
	"context"
	"fmt"
	"sort"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/normalize/ddlmap"
)

// The live table set (specs/tableset.md LT1-LT5): tables join and leave
// the bridge while it runs, so the adapter follows a table-set change
// in place instead of restarting.

// partByID returns the partition of a physical table; the row path calls
// it without a lock.
func (b *Bridge) partByID(id int64) (*partition, bool) {
	p, ok := (*b.byID.Load())[id]
	return p, ok
}

// publish makes parts visible to the row path: a new byID map with them,
// and b.parts kept sorted. Caller holds ctl.
func (b *Bridge) publish(parts []*partition) {
	old := *b.byID.Load()
	next := make(map[int64]*partition, len(old)+len(parts))
	for id, p := range old {
		next[id] = p
	}
	for _, p := range parts {
		next[p.tableID] = p
		b.parts = append(b.parts, p)
	}
	sort.Slice(b.parts, func(i, j int) bool { return b.parts[i].name < b.parts[j].name })
	b.byID.Store(&next)
}

// AddTables starts mirroring tables that join the set at ts (LT1, LT4): a
// table a DDL at ts created or renamed into the filter, or one added
// through /admin/tables. Each logical table gets its collection: created
// at ts (INITIAL_CREATION, as Open does, N30) unless the emulator has an
// active one by that name that maps exactly its partitions (a collection
// kept from before is resumed, LT4). The partitions start at ts with
// this run's epoch. The caller subscribes them from ts afterwards
// (minicdc M50). A physical id the bridge already knows, a collection
// name already mirrored, or an existing collection that maps other
// partitions is an error naming the table and the collection.
func (b *Bridge) AddTables(ctx context.Context, tables []Table, ts uint64) error {
	b.ctl.Lock()
	defer b.ctl.Unlock()
	if !b.opened {
		return fmt.Errorf("normalize: AddTables before Open")
	}
	if err := b.checkStopped(); err != nil {
		return err
	}
	list, err := b.sink.ListCollections(ctx, &apiv1.ListCollectionsRequest{})
	if err != nil {
		return fmt.Errorf("normalize: listing collections: %w", err)
	}
	status := map[string]*apiv1.CollectionStatus{}
	for _, st := range list.GetCollections() {
		if st.GetState() != apiv1.CollectionState_COLLECTION_STATE_DROPPED {
			status[st.GetDefinition().GetName()] = st
		}
	}
	byLogical := map[int64]*collection{}
	var order []*collection
	for _, t := range tables {
		if t.PhysicalID <= 0 || t.Info == nil {
			return fmt.Errorf("normalize: AddTables: table %d needs a physical id > 0 and its Info", t.PhysicalID)
		}
		if _, known := b.partByID(t.PhysicalID); known {
			return fmt.Errorf("normalize: table %s.%s (physical id %d) is already mirrored in this run", t.Database, t.Info.Name.O, t.PhysicalID)
		}
		coll := byLogical[t.Info.ID]
		if coll == nil {
			name := t.Collection
			if name == "" {
				name = b.cfg.CollectionName(t.Database, t.Info.Name.L)
			}
			for _, other := range b.collections {
				if other.name == name && other.active && !other.detached {
					return fmt.Errorf("normalize: table %s.%s: collection %q is already mirrored from table %d", t.Database, t.Info.Name.O, name, other.logicalID)
				}
			}
			coll = &collection{
				name: name, schemaID: t.SchemaID, logicalID: t.Info.ID, info: t.Info, roles: b.cfg.Roles[name],
				source:  SourceInfo{KeyspaceID: b.cfg.KeyspaceID, Database: t.Database, Table: t.Info.Name.O, LogicalTableID: t.Info.ID},
				pending: map[string]*apiv1.PutCollectionSchemaRequest{},
			}
			byLogical[t.Info.ID] = coll
			order = append(order, coll)
		}
		p, err := b.newPartition(t.PhysicalID, coll)
		if err != nil {
			return err
		}
		p.seq = seqCounter{epoch: b.resume.Epoch, next: 1}
		coll.partitions = append(coll.partitions, p)
	}
	for _, coll := range order {
		if _, ok := status[coll.name]; ok {
			return &CollectionExistsError{Collection: coll.name, Table: coll.source.Database + "." + coll.source.Table}
		}
	}
	var parts []*partition
	for _, coll := range order {
		sort.Slice(coll.partitions, func(i, j int) bool { return coll.partitions[i].name < coll.partitions[j].name })
		if err := b.createCollection(ctx, coll, ts); err != nil {
			return err
		}
		// A dropped or detached collection of the same name is replaced.
		kept := b.collections[:0]
		for _, other := range b.collections {
			if other.name != coll.name {
				kept = append(kept, other)
			}
		}
		b.collections = append(kept, coll)
		parts = append(parts, coll.partitions...)
	}
	sort.Slice(b.collections, func(i, j int) bool { return b.collections[i].name < b.collections[j].name })
	b.publish(parts)
	return nil
}

// createCollection creates coll's collection at ts (N30). Caller holds ctl.
func (b *Bridge) createCollection(ctx context.Context, coll *collection, ts uint64) error {
	s, err := ddlmap.BuildShape(coll.info, coll.roles)
	if err != nil {
		return err
	}
	req := &apiv1.PutCollectionSchemaRequest{
		Meta: &apiv1.RequestMeta{
			IdempotencyKey: fmt.Sprintf("init/%s/%d", coll.name, ts),
			ClientId:       b.cfg.ClientID,
			ClientKind:     apiv1.ClientKind_CLIENT_KIND_TIDB_DDL_ADAPTER,
		},
		Scope:         &apiv1.SchemaScope{Collection: coll.name, DdlCommitTs: ts},
		SchemaVersion: 1,
		Fence: &apiv1.SchemaFence{
			ExpectedPrevSchemaVersion: 0, SchemaGenerationToken: apiv1.InitialGenerationToken, EnforceMonotonicApply: true,
		},
		Definition:   ddlmap.Definition(coll.name, s, coll.source, coll.partitionNames(nil), !b.cfg.DisableMetadataAux),
		UpdatePolicy: apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_INITIAL_CREATION,
	}
	resp, err := b.sink.PutCollectionSchema(ctx, req)
	if err != nil {
		return fmt.Errorf("normalize: creating collection %q for table %s.%s: %w", coll.name, coll.source.Database, coll.source.Table, err)
	}
	coll.applyLineage(req, resp)
	return nil
}

// CollectionExistsError reports a table that joins the set while the
// emulator already has an active collection of its name (LT4): a
// collection kept from before (a rename out of the filter, an earlier
// run) missed what happened since, so it is never resumed.
type CollectionExistsError struct {
	Collection string
	Table      string // db.table
}

func (e *CollectionExistsError) Error() string {
	return fmt.Sprintf("normalize: table %s: collection %q already exists (kept from before, it missed the changes since); drop it to mirror the table again", e.Table, e.Collection)
}

// DetachTables stops mirroring the physical tables ids (LT3): their
// collections are kept as they are (definition, documents, progress at
// the last checkpoint), receive no DDL and no row any more, and rows of
// them still buffered are never applied. It returns the collections
// detached. An id the bridge does not mirror is an error.
func (b *Bridge) DetachTables(ids []int64) ([]string, error) {
	b.ctl.Lock()
	defer b.ctl.Unlock()
	var names []string
	seen := map[*collection]bool{}
	for _, id := range ids {
		p, ok := b.partByID(id)
		if !ok || p.retired {
			return nil, fmt.Errorf("normalize: table %d is not mirrored", id)
		}
		p.retired = true
		p.held = false // its snapshot, if one runs, is abandoned (LT6)
		if !seen[p.coll] {
			seen[p.coll] = true
			p.coll.detached = true
			names = append(names, p.coll.name)
		}
	}
	return names, nil
}

// TakeTableSetChange returns the table-set change the last DDLs made
// (N34: TRUNCATE TABLE, partition DDLs), and follows it in place (LT2):
// the new partitions join the row path at once; the pending error is
// cleared, so the bridge no longer stops the runtime for it. The caller
// changes the runtime's set (minicdc.ChangeTablesInDDL) with Added and
// Dropped. nil when no change is pending.
func (b *Bridge) TakeTableSetChange() *TableSetChangedError {
	b.ctl.Lock()
	defer b.ctl.Unlock()
	e := b.tableSet
	if e == nil {
		return nil
	}
	b.tableSet = nil
	var parts []*partition
	for _, c := range b.collections {
		for _, p := range c.partitions {
			if p.added {
				if _, known := b.partByID(p.tableID); !known {
					parts = append(parts, p)
				}
				p.added = false
			}
		}
	}
	b.publish(parts)
	return e
}
