package adapter

import (
	"context"
	"fmt"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/normalize"
)

// tablesAtResume re-resolves a filter at the ts a rerun resumes from
// (TF8): the lowest progress stored for a collection whose source table
// the filter selects. A table created while the adapter was stopped does
// not exist there: it is left out and picked up when its CREATE TABLE is
// replayed (LT1), so it is mirrored from its creation; a table dropped
// meanwhile is still in the set and its DROP replayed (LT3). Without
// stored progress (a fresh run) the tables resolved at the start stay.
func tablesAtResume(ctx context.Context, up *Upstream, sink normalize.Sink, cfg Config) ([]TableRef, error) {
	list, err := sink.ListCollections(ctx, &apiv1.ListCollectionsRequest{})
	if err != nil {
		return nil, fmt.Errorf("adapter: listing collections: %w", err)
	}
	var parts []string
	for _, st := range list.GetCollections() {
		src := st.GetDefinition().GetSource()
		if st.GetState() == apiv1.CollectionState_COLLECTION_STATE_DROPPED || src == nil || !cfg.Filter.Match(src.GetDatabase(), src.GetTable()) {
			continue // kept after leaving the filter (LT3), or not ours
		}
		parts = append(parts, st.GetDefinition().GetSourcePartitions()...)
	}
	if len(parts) == 0 {
		return cfg.Tables, nil
	}
	res, err := normalize.ResumePoint(ctx, sink, parts, cfg.StartTs)
	if err != nil {
		return nil, err
	}
	var at uint64
	for _, st := range res.Stored {
		if ts := st.GetResolvedTs(); ts > 0 && (at == 0 || ts < at) {
			at = ts
		}
	}
	if at == 0 {
		return cfg.Tables, nil
	}
	refs, _, err := ResolveFilter(ctx, up, cfg.Filter, at)
	if err != nil {
		return nil, fmt.Errorf("adapter: resuming at ts %d: %w", at, err)
	}
	return refs, nil
}
