package adapter

// The table set: which physical tables the adapter follows, resolved from
// the upstream and aligned with what the emulator's collections map.

import (
	"context"
	"fmt"
	"strings"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/normalize"
	"github.com/searchfabric/sfemu/upstream/schemastore"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
)

// resolveTables finds the physical tables of refs: every physical
// partition of a table is one path (M47). In process they come from the
// SQL front's current catalog; over the wire (embedded or real) from the
// meta keys at ts (0 = the upstream's current ts) read by snapshot, the
// way a real cluster is read (SR1).
func resolveTables(ctx context.Context, up *Upstream, refs []TableRef, ts uint64) ([]normalize.Table, error) {
	viaCatalog := up.Mode() == ModeInProcess && up.SQL != nil
	if !viaCatalog {
		if ts == 0 {
			var err error
			if ts, err = up.CurrentTs(ctx); err != nil {
				return nil, fmt.Errorf("adapter: resolving tables: current ts: %w", err)
			}
		}
	}
	var tables []normalize.Table
	for _, ref := range refs {
		var ti *model.TableInfo
		var dbID int64
		var err error
		if viaCatalog {
			ti, dbID, err = up.SQL.TableInfo(ref.DB, ref.Table)
		} else {
			ti, dbID, err = schemastore.LookupTable(ctx, up.Snapshot(), ts, ref.DB, ref.Table)
		}
		if err != nil {
			return nil, fmt.Errorf("adapter: table %s: %w", ref, err)
		}
		for _, phys := range ti.PhysicalIDs() {
			// An explicit collection binds the table (a renamed table keeps
			// feeding it); otherwise Bridge.CollectionName decides.
			tables = append(tables, normalize.Table{PhysicalID: phys, SchemaID: dbID, Database: ref.DB, Info: minicdc.NewTableInfo(ti), Collection: ref.Collection})
		}
	}
	return tables, nil
}

// alignWithMapped makes a cold start survive a stop in the middle of a
// table-set change (SR10). The table set resolved from the upstream's
// catalog is what the tables are now; a collection whose adapter stopped
// before it handled a TRUNCATE or partition DDL (or after only some of
// that change's schema requests were acknowledged) maps other physical
// tables, and the bridge refuses to open over them. For such a
// collection the table set is the partitions it maps, with the table's
// schema read at their stored progress (at the collection's last schema
// change when nothing is stored): the runtime then replays the change
// from the stored progress and the supervisor follows it, as without
// the stop. A collection that does not exist yet, or maps exactly the
// resolved tables, is left alone.
func alignWithMapped(ctx context.Context, up *Upstream, sink normalize.Sink, ks uint32, refs []TableRef, tables []normalize.Table) ([]normalize.Table, error) {
	list, err := sink.ListCollections(ctx, &apiv1.ListCollectionsRequest{})
	if err != nil {
		return nil, fmt.Errorf("adapter: listing collections: %w", err)
	}
	byName := map[string]*apiv1.CollectionStatus{}
	for _, st := range list.GetCollections() {
		if st.GetState() != apiv1.CollectionState_COLLECTION_STATE_DROPPED {
			byName[st.GetDefinition().GetName()] = st
		}
	}
	var out []normalize.Table
	for _, ref := range refs {
		var resolved []normalize.Table
		for _, t := range tables {
			if t.Database == ref.DB && t.Info != nil && strings.EqualFold(t.Info.Name.O, ref.Table) {
				resolved = append(resolved, t)
			}
		}
		st := byName[ref.CollectionName()]
		mapped := st.GetDefinition().GetSourcePartitions()
		if st == nil || len(mapped) == 0 || samePartitions(ks, mapped, resolved) {
			out = append(out, resolved...)
			continue
		}
		ids := make([]int64, 0, len(mapped))
		for _, name := range mapped {
			_, id, err := apiv1.ParsePartitionName(name)
			if err != nil {
				return nil, fmt.Errorf("adapter: collection %q maps partition %q: %w", ref.CollectionName(), name, err)
			}
			ids = append(ids, id)
		}
		prog, err := sink.GetProgress(ctx, &apiv1.GetProgressRequest{SourcePartitions: mapped})
		if err != nil {
			return nil, fmt.Errorf("adapter: collection %q: reading stored progress: %w", ref.CollectionName(), err)
		}
		ts := st.GetLineage().GetLastDdlCommitTs()
		for _, ps := range prog.GetPartitions() {
			ts = max(ts, ps.GetResolvedTs())
		}
		if ts == 0 {
			return nil, fmt.Errorf("adapter: collection %q maps %v, not the physical tables of %s now, and has no stored progress or schema change to read the table at",
				ref.CollectionName(), mapped, ref)
		}
		ti, dbID, err := schemastore.LookupTable(ctx, up.Snapshot(), ts, ref.DB, ref.Table)
		if err != nil {
			// Renamed since (then truncated, repartitioned): at ts it had
			// another name; its mapped partitions name it.
			ti, dbID, err = schemastore.LookupTableByPhysicalID(ctx, up.Snapshot(), ts, ref.DB, ids[0])
		}
		if err != nil {
			return nil, fmt.Errorf("adapter: collection %q maps %v, not the physical tables of %s now; reading the table at its stored progress %d: %w",
				ref.CollectionName(), mapped, ref, ts, err)
		}
		for _, id := range ids {
			out = append(out, normalize.Table{PhysicalID: id, SchemaID: dbID, Database: ref.DB, Info: minicdc.NewTableInfo(ti), Collection: ref.Collection})
		}
	}
	return out, nil
}

// samePartitions reports whether a collection's mapped partitions are
// exactly the physical tables resolved.
func samePartitions(ks uint32, mapped []string, resolved []normalize.Table) bool {
	if len(mapped) != len(resolved) {
		return false
	}
	have := map[string]bool{}
	for _, name := range mapped {
		have[name] = true
	}
	for _, t := range resolved {
		if !have[normalize.PartitionName(ks, t.PhysicalID)] {
			return false
		}
	}
	return true
}
