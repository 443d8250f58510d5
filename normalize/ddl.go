package normalize

import (
	"context"
	"fmt"
	"github.com/searchfabric/sfemu/normalize/ddlmap"
	"sort"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/minicdc"
)

// DDL is the DDL path (N25-N29).
func (b *Bridge) DDL(ctx context.Context, ddl minicdc.DDL) error {
	ev := &ddl
	b.ctl.Lock()
	defer b.ctl.Unlock()
	if !b.opened {
		return fmt.Errorf("normalize: DDL before Open")
	}
	if err := b.checkStopped(); err != nil {
		return err
	}
	T := ev.FinishedTs
	if b.tableSet != nil && T > b.tableSet.FinishedTs {
		// A later DDL: the change's group is complete (N35). This DDL is
		// redelivered after the restart (its FinishedTs is above the
		// resume point).
		return b.tableSet
	}
	tableSet := b.changesTableSet(ev)
	if tableSet {
		// The restart resumes every partition from T (N34): flush all of
		// them now (and advance them once the schema requests were
		// acknowledged, below). Every row at or below T of every path was
		// delivered (the DDL fence is the min over all tables, M29).
		for _, p := range b.parts {
			if p.held {
				continue // stores no progress until its snapshot ends (LT6)
			}
			if err := b.drainAndIngest(ctx, p, T, true); err != nil {
				return err
			}
		}
	}
	for _, coll := range b.collections {
		if !affects(ev, coll) {
			continue
		}
		if coll.appliedBefore(T, ev.JobID) {
			continue // already applied (N28)
		}
		if held := heldIn(coll); held != "" {
			return b.stop(fmt.Errorf("normalize: DDL job %d (%s) at %d of collection %q while the snapshot of %s runs (the host must wait for it, LT6)", ev.JobID, ev.Action, T, coll.name, held))
		}
		// Flush every row at or below T (N26). Progress at T is stored
		// only after the schema change at T was acknowledged: a resume
		// at T would not redeliver the DDL (the start ts is exclusive).
		for _, p := range coll.partitions {
			if err := b.drainAndIngest(ctx, p, T, true); err != nil {
				return err
			}
		}
		wasActive := coll.active
		key := ddlmap.IdempotencyKey(ev, coll.name)
		req := coll.pending[key]
		var dropped map[string]bool
		if req == nil {
			var skip bool
			var err error
			req, dropped, skip, err = b.schemaRequest(ev, coll)
			if err != nil {
				return err
			}
			if skip {
				continue
			}
			coll.pending[key] = req
		} else {
			dropped = ddlmap.Dropped(ev, coll.view())
		}
		resp, err := b.sink.PutCollectionSchema(ctx, req)
		if err != nil {
			return fmt.Errorf("normalize: DDL job %d (%s) at %d for collection %q: %w",
				ev.JobID, ev.Action, T, coll.name, err)
		}
		delete(coll.pending, key)
		sameTs := coll.lastJobs != nil && coll.lastDDL == T
		added, removed, err := b.applyDDL(coll, req, resp, dropped, ddlmap.PostTable(ev, coll.view()))
		if err != nil {
			return err
		}
		if !sameTs {
			coll.lastJobs = map[int64]bool{}
		}
		coll.lastJobs[ev.JobID] = true
		if len(added) > 0 || len(removed) > 0 {
			b.noteTableSetChange(ev, coll, added, removed)
		}
		if wasActive {
			// Every row at or below T was acknowledged and so is the
			// schema change at T: record the progress (N26).
			for _, p := range coll.partitions {
				if err := b.advance(ctx, p, T); err != nil {
					return err
				}
			}
		}
	}
	if tableSet {
		for _, p := range b.parts {
			if err := b.advance(ctx, p, T); err != nil {
				return err
			}
		}
	}
	return nil
}

// appliedBefore reports a DDL event the collection's lineage already
// covers (N28): an older FinishedTs, or the same FinishedTs and either the
// same job applied by this run or a lineage learned from the emulator (a
// group of events sharing one FinishedTs is delivered together, M32).
func (c *collection) appliedBefore(ts uint64, jobID int64) bool {
	if !c.active && c.lastDDL == 0 {
		return false
	}
	if ts < c.lastDDL {
		return true
	}
	if ts == c.lastDDL {
		return c.lastJobs == nil || c.lastJobs[jobID]
	}
	return false
}

// applyDDL updates the bridge's lineage after an acknowledged request and
// returns the physical ids the request mapped and unmapped (N34).
func (b *Bridge) applyDDL(coll *collection, req *apiv1.PutCollectionSchemaRequest, resp *apiv1.PutCollectionSchemaResponse,
	dropped map[string]bool, post *minicdc.TableInfo) (added, removed []int64, err error) {
	switch req.GetUpdatePolicy() {
	case apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_DROP:
		coll.active = false
		coll.def = nil
		coll.token = ""
		coll.version = 0
		coll.lastDDL = req.GetScope().GetDdlCommitTs()
		for _, p := range coll.partitions {
			// The emulator removed the partition's state (E30).
			p.seq.next, p.advanced, p.stateInSink = 1, 0, false
			p.seqRun.restart()
		}
		return nil, nil, nil
	case apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_INITIAL_CREATION:
		for _, p := range coll.partitions {
			p.retired = false
			p.seq.next, p.advanced, p.stateInSink = 1, 0, false
			p.seqRun.restart()
		}
	}
	for _, p := range coll.partitions {
		if dropped[p.name] && !p.retired {
			p.retired = true
			removed = append(removed, p.tableID)
		}
	}
	// Partitions the definition maps that the collection did not have
	// (N34): the emulator starts them at ddl_commit_ts (E29).
	have := map[string]bool{}
	for _, p := range coll.partitions {
		if !p.retired {
			have[p.name] = true
		}
	}
	T := req.GetScope().GetDdlCommitTs()
	for _, name := range req.GetDefinition().GetSourcePartitions() {
		if have[name] {
			continue
		}
		id, ok := partitionID(name)
		if !ok {
			return nil, nil, fmt.Errorf("normalize: collection %q: cannot parse source partition %q", coll.name, name)
		}
		np, err := b.newPartition(id, coll)
		if err != nil {
			return nil, nil, err
		}
		np.added, np.advanced, np.stateInSink, np.lastCP = true, T, true, T
		np.seq = seqCounter{epoch: b.resume.Epoch, next: 1}
		coll.partitions = append(coll.partitions, np)
		added = append(added, id)
	}
	sort.Slice(coll.partitions, func(i, j int) bool { return coll.partitions[i].name < coll.partitions[j].name })
	if src := req.GetDefinition().GetSource(); src != nil {
		coll.source.Database, coll.source.Table = src.GetDatabase(), src.GetTable()
		if id := src.GetLogicalTableId(); id != 0 {
			coll.logicalID, coll.source.LogicalTableID = id, id
		}
	}
	if post != nil {
		coll.info = post
	}
	coll.applyLineage(req, resp)
	return added, removed, nil
}

// view is the collection's lineage as ddlmap reads it.
func (c *collection) view() *ddlmap.Collection {
	v := &ddlmap.Collection{Name: c.name, SchemaID: c.schemaID, LogicalID: c.logicalID, Source: c.source, Roles: c.roles,
		Active: c.active, Def: c.def, Version: c.version, Token: c.token, Partitions: make([]ddlmap.Partition, len(c.partitions))}
	for i, p := range c.partitions {
		v.Partitions[i] = ddlmap.Partition{ID: p.tableID, Name: p.name, Retired: p.retired}
	}
	return v
}

// affects is N25 (ddlmap.Affects).
func affects(ev *minicdc.DDL, coll *collection) bool {
	return !coll.detached && ddlmap.Affects(ev, coll.view())
}

// schemaRequest builds the request for one DDL and collection (N26, N27;
// ddlmap.Request).
func (b *Bridge) schemaRequest(ev *minicdc.DDL, coll *collection) (*apiv1.PutCollectionSchemaRequest, map[string]bool, bool, error) {
	return ddlmap.Request(ddlmap.Config{ClientID: b.cfg.ClientID, KeyspaceID: b.cfg.KeyspaceID, MetadataAux: !b.cfg.DisableMetadataAux}, ev, coll.view())
}
