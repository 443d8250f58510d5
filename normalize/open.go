package normalize

import (
	"context"
	"fmt"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/normalize/ddlmap"
)

// Open reads the emulator's stored state, fixes this run's epoch (N4, N5),
// and creates the collections that have no lineage yet (N30).
func (b *Bridge) Open(ctx context.Context) (Resume, error) {
	b.ctl.Lock()
	defer b.ctl.Unlock()
	if b.opened {
		return b.resume, fmt.Errorf("normalize: Open called twice")
	}
	res, err := ResumePoint(ctx, b.sink, b.partitionNamesLocked(), b.cfg.StartTs)
	if err != nil {
		return Resume{}, err
	}
	list, err := b.sink.ListCollections(ctx, &apiv1.ListCollectionsRequest{})
	if err != nil {
		return Resume{}, fmt.Errorf("normalize: listing collections: %w", err)
	}
	status := map[string]*apiv1.CollectionStatus{}
	for _, st := range list.GetCollections() {
		if st.GetState() == apiv1.CollectionState_COLLECTION_STATE_DROPPED {
			continue
		}
		status[st.GetDefinition().GetName()] = st
	}
	for _, p := range b.parts {
		p.seq = seqCounter{epoch: res.Epoch, next: 1}
		if st, ok := res.Stored[p.name]; ok {
			p.stateInSink = true
			p.advanced = st.GetResolvedTs()
			p.skip = st.GetResolvedTs()
		}
	}
	for _, coll := range b.collections {
		s, err := ddlmap.BuildShape(b.tableInfoFor(coll), coll.roles)
		if err != nil {
			return Resume{}, err
		}
		want := ddlmap.Definition(coll.name, s, coll.source, coll.partitionNames(nil), !b.cfg.DisableMetadataAux)
		if st, ok := status[coll.name]; ok {
			mapped := map[string]bool{}
			for _, pn := range st.GetDefinition().GetSourcePartitions() {
				mapped[pn] = true
			}
			for _, p := range coll.partitions {
				if !mapped[p.name] {
					return Resume{}, fmt.Errorf("normalize: collection %q exists but does not map partition %s (mapped: %v)",
						coll.name, p.name, st.GetDefinition().GetSourcePartitions())
				}
			}
			coll.active = true
			coll.def = st.GetDefinition()
			coll.version = st.GetLineage().GetSchemaVersion()
			coll.token = st.GetLineage().GetSchemaGenerationToken()
			coll.lastDDL = st.GetLineage().GetLastDdlCommitTs()
			if st.GetLineage().GetLastUpdatePolicy() != apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_INITIAL_CREATION {
				// A schema change at T is sent only after every row at or
				// below T of the collection's partitions was acknowledged
				// (N26): T is acknowledged progress even when the process
				// stopped before storing it. Skip those rows and store T
				// with the new epoch below (N20, N5), instead of re-sending
				// them against the post-DDL definition. (A bootstrap
				// request, INITIAL_CREATION, flushed nothing.)
				for _, p := range coll.partitions {
					if p.stateInSink && p.advanced < coll.lastDDL {
						p.advanced, p.skip = coll.lastDDL, coll.lastDDL
					}
				}
			}
			continue
		}
		req := &apiv1.PutCollectionSchemaRequest{
			Meta: &apiv1.RequestMeta{
				IdempotencyKey: fmt.Sprintf("init/%s/%d", coll.name, b.cfg.StartTs),
				ClientId:       b.cfg.ClientID,
				ClientKind:     apiv1.ClientKind_CLIENT_KIND_TIDB_DDL_ADAPTER,
			},
			Scope:         &apiv1.SchemaScope{Collection: coll.name, DdlCommitTs: b.cfg.StartTs},
			SchemaVersion: 1,
			Fence: &apiv1.SchemaFence{
				ExpectedPrevSchemaVersion: 0, SchemaGenerationToken: apiv1.InitialGenerationToken, EnforceMonotonicApply: true,
			},
			Definition:   want,
			UpdatePolicy: apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_INITIAL_CREATION,
		}
		resp, err := b.sink.PutCollectionSchema(ctx, req)
		if err != nil {
			return Resume{}, fmt.Errorf("normalize: creating collection %q: %w", coll.name, err)
		}
		coll.applyLineage(req, resp)
		for _, p := range coll.partitions {
			p.stateInSink = false
		}
	}
	// Persist the new epoch at once (N5).
	for _, p := range b.parts {
		if !p.stateInSink || p.advanced == 0 {
			continue
		}
		if _, err := b.sink.AdvancePartition(ctx, &apiv1.PartitionProgress{
			SourcePartition: p.name, SourceEpoch: res.Epoch, ResolvedTs: p.advanced,
		}); err != nil {
			return Resume{}, fmt.Errorf("normalize: persisting epoch %d for %s: %w", res.Epoch, p.name, err)
		}
	}
	b.resume = res
	b.opened = true
	b.ready.Store(true)
	return res, nil
}

func (c *collection) partitionNames(except map[string]bool) []string {
	var out []string
	for _, p := range c.partitions {
		if !p.retired && !except[p.name] {
			out = append(out, p.name)
		}
	}
	return out
}

func (c *collection) applyLineage(req *apiv1.PutCollectionSchemaRequest, resp *apiv1.PutCollectionSchemaResponse) {
	c.active = true
	c.def = req.GetDefinition()
	c.version = resp.GetLineage().GetSchemaVersion()
	if c.version == 0 {
		c.version = req.GetSchemaVersion()
	}
	c.token = resp.GetLineage().GetSchemaGenerationToken()
	c.lastDDL = req.GetScope().GetDdlCommitTs()
}
