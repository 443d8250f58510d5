package ddlmap

import (
	"fmt"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/minicdc"
)

// Partition is one physical table a collection maps.
type Partition struct {
	ID   int64
	Name string // source partition (N1)
	// Retired marks a partition a DDL of this run removed from the
	// collection: it still identifies the collection (N25) but is no
	// longer mapped.
	Retired bool
}

// Collection is the snapshot of one collection's lineage a mapping reads.
type Collection struct {
	Name      string
	SchemaID  int64
	LogicalID int64
	Source    SourceInfo
	Roles     RoleOverrides
	// Partitions sorted by name.
	Partitions []Partition
	// Active is false before the first generation and after a DROP; Def,
	// Version and Token are the current lineage when active.
	Active  bool
	Def     *apiv1.CollectionDefinition
	Version uint64
	Token   string
}

// Config is what the requests carry besides the DDL and the lineage.
type Config struct {
	ClientID    string
	KeyspaceID  uint32
	MetadataAux bool
}

// IsDrop reports DDLs that retire a whole table or database.
func IsDrop(action minicdc.DDLAction) bool { return action.IsDrop() }

// Affects is N25: the DDL names the collection's logical table or one of
// its partitions (as its table, one of its tables, or a dropped table), or
// drops its database.
func Affects(ev *minicdc.DDL, c *Collection) bool {
	ids := map[int64]bool{c.LogicalID: true}
	for _, p := range c.Partitions {
		ids[p.ID] = true
	}
	if ids[ev.TableID] {
		return true
	}
	if ev.Table != nil && ids[ev.Table.ID] {
		return true
	}
	for _, ti := range ev.MultipleTables {
		if ti != nil && ids[ti.ID] {
			return true
		}
	}
	for _, id := range ev.DroppedTableIDs {
		if ids[id] {
			return true
		}
	}
	return ev.Action == minicdc.ActionDropSchema && ev.SchemaID == c.SchemaID
}

// PostTable finds the post-DDL schema of the collection's table in ev, or
// nil.
func PostTable(ev *minicdc.DDL, c *Collection) *minicdc.TableInfo {
	for _, ti := range ev.MultipleTables {
		if ti != nil && ti.ID == c.LogicalID {
			return ti
		}
	}
	if ev.Table != nil {
		if ev.Table.ID == c.LogicalID || ev.TableID == c.LogicalID {
			return ev.Table
		}
		if ev.Action == minicdc.ActionTruncateTable {
			return ev.Table // same columns under a new id
		}
	}
	return nil
}

// Dropped lists (by name) the collection's partitions the DDL removes
// (N34): the ids it drops and, when it carries the post-DDL table, every
// partition that table no longer has (a truncated table or partition
// lives on under a new id).
func Dropped(ev *minicdc.DDL, c *Collection) map[string]bool {
	out := map[string]bool{}
	drop := map[int64]bool{}
	for _, id := range ev.DroppedTableIDs {
		drop[id] = true
	}
	var live map[int64]bool
	if ti := PostTable(ev, c); ti != nil && !IsDrop(ev.Action) {
		live = map[int64]bool{}
		for _, id := range ti.PhysicalIDs() {
			live[id] = true
		}
	}
	for _, p := range c.Partitions {
		if p.Retired {
			continue
		}
		if drop[p.ID] || (live != nil && !live[p.ID]) {
			out[p.Name] = true
		}
	}
	return out
}

// Added lists the physical tables the DDL creates for the collection's
// logical table (N34): its AddedTables that the post-DDL table has and the
// collection does not map yet (for EXCHANGE PARTITION, which lists none,
// every post-DDL physical id it does not map).
func Added(ev *minicdc.DDL, c *Collection) []int64 {
	ti := PostTable(ev, c)
	if ti == nil || IsDrop(ev.Action) {
		return nil
	}
	ids := make([]int64, 0, len(ev.AddedTables))
	for _, a := range ev.AddedTables {
		ids = append(ids, a.TableID)
	}
	if ev.Action == minicdc.ActionExchangeTablePartition && ti.ID == c.LogicalID {
		// The exchanged-in table's id becomes a partition; the store
		// lists no added table (no new subscription in TiCDC's view).
		ids = ti.PhysicalIDs()
	}
	if len(ids) == 0 {
		return nil
	}
	phys := map[int64]bool{}
	for _, id := range ti.PhysicalIDs() {
		phys[id] = true
	}
	have := map[int64]bool{}
	for _, p := range c.Partitions {
		if !p.Retired {
			have[p.ID] = true
		}
	}
	var out []int64
	for _, id := range ids {
		if phys[id] && !have[id] {
			out = append(out, id)
			have[id] = true
		}
	}
	return out
}

// IdempotencyKey is the replay-stable key of the request of one DDL and
// collection (N26).
func IdempotencyKey(ev *minicdc.DDL, collection string) string {
	return fmt.Sprintf("ddl/%d/%d/%s", ev.JobID, ev.FinishedTs, collection)
}

// Request builds the complete request for one DDL and collection (N26,
// N27) and the partitions it removes. skip reports a DDL that needs no
// request (a drop of a collection that has no lineage).
func Request(cfg Config, ev *minicdc.DDL, c *Collection) (req *apiv1.PutCollectionSchemaRequest, dropped map[string]bool, skip bool, err error) {
	T := ev.FinishedTs
	dropped = Dropped(ev, c)
	var live []string
	for _, p := range c.Partitions {
		if !p.Retired && !dropped[p.Name] {
			live = append(live, p.Name)
		}
	}
	for _, id := range Added(ev, c) {
		live = append(live, apiv1.PartitionName(cfg.KeyspaceID, id))
	}
	dropAll := IsDrop(ev.Action) || len(live) == 0
	meta := &apiv1.RequestMeta{IdempotencyKey: IdempotencyKey(ev, c.Name), ClientId: cfg.ClientID, ClientKind: apiv1.ClientKind_CLIENT_KIND_TIDB_DDL_ADAPTER}
	scope := &apiv1.SchemaScope{Collection: c.Name, DdlCommitTs: T}
	if dropAll {
		if !c.Active {
			return nil, nil, true, nil
		}
		return &apiv1.PutCollectionSchemaRequest{
			Meta: meta, Scope: scope, SchemaVersion: uint64(ev.SchemaVersion),
			Fence:        &apiv1.SchemaFence{ExpectedPrevSchemaVersion: c.Version, SchemaGenerationToken: c.Token, EnforceMonotonicApply: true},
			Definition:   c.Def,
			UpdatePolicy: apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_DROP,
		}, dropped, false, nil
	}
	ti := PostTable(ev, c)
	if ti == nil {
		return nil, nil, false, fmt.Errorf("normalize: DDL job %d (%s) at %d affects collection %q but carries no schema for table %d",
			ev.JobID, ev.Action, T, c.Name, c.LogicalID)
	}
	s, err := BuildShape(ti, c.Roles)
	if err != nil {
		return nil, nil, false, fmt.Errorf("normalize: DDL job %d at %d: %w", ev.JobID, T, err)
	}
	src := c.Source
	if ev.SchemaName != "" {
		src.Database = ev.SchemaName
	}
	src.Table = ti.Name.O
	src.LogicalTableID = ti.ID // a truncated table has a new id (N34)
	def := Definition(c.Name, s, src, live, cfg.MetadataAux)
	var old *apiv1.CollectionDefinition
	if c.Active {
		old = c.Def
	}
	policy := Classify(ev.Action, false, old, def)
	req = &apiv1.PutCollectionSchemaRequest{Meta: meta, Scope: scope, Definition: def, UpdatePolicy: policy}
	if policy == apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_INITIAL_CREATION {
		req.SchemaVersion = 1 // the zero-state tuple (E23, N27)
		req.Fence = &apiv1.SchemaFence{ExpectedPrevSchemaVersion: 0, SchemaGenerationToken: apiv1.InitialGenerationToken, EnforceMonotonicApply: true}
		return req, dropped, false, nil
	}
	if ev.SchemaVersion <= 0 {
		return nil, nil, false, fmt.Errorf("normalize: DDL job %d at %d has schema version %d, want > 0", ev.JobID, T, ev.SchemaVersion)
	}
	req.SchemaVersion = uint64(ev.SchemaVersion)
	req.Fence = &apiv1.SchemaFence{ExpectedPrevSchemaVersion: c.Version, SchemaGenerationToken: c.Token, EnforceMonotonicApply: true}
	return req, dropped, false, nil
}
