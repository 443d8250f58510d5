package adapter

import (
	"context"
	"fmt"

	"github.com/searchfabric/sfemu/tablefilter"
	"github.com/searchfabric/sfemu/upstream/schemastore"
)

// ResolveFilter lists the tables f selects in the schema at ts (0 = the
// upstream's current ts), read from the meta keys by snapshot in every
// mode (TF8): one TableRef per table, collection `<db>.<table>`, sorted by
// database then table. It returns the ts it resolved at. A filter that
// selects no table yet returns none: the adapter then starts with an
// empty set and picks tables up at their creation (LT8, M3).
func ResolveFilter(ctx context.Context, up *Upstream, f *tablefilter.Filter, ts uint64) ([]TableRef, uint64, error) {
	if ts == 0 {
		var err error
		if ts, err = up.CurrentTs(ctx); err != nil {
			return nil, 0, fmt.Errorf("adapter: resolving the table filter %q: current ts: %w", f, err)
		}
	}
	all, err := schemastore.ListTables(ctx, up.Snapshot(), ts, f.MatchSchema)
	if err != nil {
		return nil, 0, fmt.Errorf("adapter: resolving the table filter %q at ts %d: %w", f, ts, err)
	}
	var refs []TableRef
	for _, t := range all {
		if f.Match(t.DB, t.Info.Name.O) {
			refs = append(refs, TableRef{DB: t.DB, Table: t.Info.Name.O})
		}
	}
	return refs, ts, nil
}
