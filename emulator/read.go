package emulator

import (
	"context"
	"fmt"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
	"github.com/searchfabric/sfemu/emulator/docstore"
)

// statusLocked builds the public status of a collection.
func (e *Emulator) statusLocked(c *collection) *apiv1.CollectionStatus {
	st := &apiv1.CollectionStatus{
		Definition: c.rec.GetDefinition(),
		Lineage:    c.rec.GetLineage(),
		State:      c.rec.GetState(),
	}
	if !c.active() {
		return st
	}
	st.DocCount = uint64(c.docs.Live())
	st.TombstoneCount = uint64(c.docs.Tombstones())
	// Watermarks are the serving generation's (E56, E58).
	g := c.serving()
	for _, m := range g.mods {
		a, _ := g.wm.Applied(contract.ModalityName(m))
		st.Modalities = append(st.Modalities, &apiv1.ModalityProgress{Modality: m, AppliedTs: a})
	}
	st.SafeTs = e.safeLocked(c)
	st.Rebuild = rebuildLocked(c)
	return st
}

func notFound(name, field string) error {
	return contract.Errf(contract.ReasonCollectionNotFound, field, "an active collection", name, "collection %q does not exist", name)
}

// GetCollection returns definition, lineage, counts and watermarks (E72).
// A dropped collection is reported with state DROPPED.
func (e *Emulator) GetCollection(ctx context.Context, req *apiv1.GetCollectionRequest) (*apiv1.CollectionStatus, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	c := e.colls[req.GetName()]
	if c == nil {
		return nil, e.reject("get_collection", notFound(req.GetName(), "name"))
	}
	return e.statusLocked(c), nil
}

// ListCollections lists collections sorted by name.
func (e *Emulator) ListCollections(ctx context.Context, req *apiv1.ListCollectionsRequest) (*apiv1.ListCollectionsResponse, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := &apiv1.ListCollectionsResponse{}
	for _, name := range sortedKeys(e.colls) {
		c := e.colls[name]
		if !c.active() && !req.GetIncludeDropped() {
			continue
		}
		out.Collections = append(out.Collections, e.statusLocked(c))
	}
	return out, nil
}

// GetProgress returns the stored per-partition state (E54), sorted by
// partition. Unknown names in the filter are left out.
func (e *Emulator) GetProgress(ctx context.Context, req *apiv1.GetProgressRequest) (*apiv1.GetProgressResponse, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := &apiv1.GetProgressResponse{}
	names := req.GetSourcePartitions()
	if len(names) == 0 {
		names = sortedKeys(e.parts)
	}
	for _, n := range names {
		if ps := e.parts[n]; ps != nil {
			out.Partitions = append(out.Partitions, clonePartition(ps))
		}
	}
	return out, nil
}

// waitFresh implements E71: it returns the collection's safe_ts once it is
// >= minTs, waiting at most MaxReadWait.
func (e *Emulator) waitFresh(ctx context.Context, name string, minTs uint64) (uint64, error) {
	var timeout <-chan struct{}
	stop := make(chan struct{})
	defer close(stop)
	for {
		e.mu.RLock()
		if e.closed {
			e.mu.RUnlock()
			return 0, contract.Errf(contract.ReasonClosed, "", "an open emulator", "closed", "emulator is closed")
		}
		c := e.colls[name]
		if c == nil || !c.active() {
			e.mu.RUnlock()
			return 0, notFound(name, "collection")
		}
		safe := e.safeLocked(c)
		ch := e.notify
		e.mu.RUnlock()
		if safe >= minTs {
			return safe, nil
		}
		if timeout == nil {
			t := make(chan struct{})
			after := e.opts.Clock.After(e.opts.MaxReadWait)
			go func() {
				select {
				case <-after:
					close(t)
				case <-ctx.Done():
				case <-stop:
				}
			}()
			timeout = t
		}
		select {
		case <-ch:
		case <-timeout:
			return 0, e.notFresh(name, minTs)
		case <-ctx.Done():
			return 0, e.notFresh(name, minTs)
		}
	}
}

func (e *Emulator) notFresh(name string, minTs uint64) error {
	e.mu.RLock()
	var safe uint64
	if c := e.colls[name]; c != nil && c.active() {
		safe = e.safeLocked(c)
	}
	e.mu.RUnlock()
	return contract.Errf(contract.ReasonNotYetFresh, "min_ts", fmt.Sprintf("safe_ts >= %d", minTs), fmt.Sprint(safe), "collection %q is not fresh enough within %s", name, e.opts.MaxReadWait)
}

// GetDocument is a point read (E70..E72).
func (e *Emulator) GetDocument(ctx context.Context, req *apiv1.GetDocumentRequest) (*apiv1.GetDocumentResponse, error) {
	resp, err := e.getDocument(ctx, req)
	return resp, e.reject("get_document", err)
}

func (e *Emulator) getDocument(ctx context.Context, req *apiv1.GetDocumentRequest) (*apiv1.GetDocumentResponse, error) {
	if req.GetPrimaryKey() == "" {
		return nil, contract.Errf(contract.ReasonInvalidArgument, "primary_key", "non-empty", `""`, "primary key is required")
	}
	readTs, err := e.waitFresh(ctx, req.GetCollection(), req.GetMinTs())
	if err != nil {
		return nil, err
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	c := e.colls[req.GetCollection()]
	if c == nil || !c.active() {
		return nil, notFound(req.GetCollection(), "collection")
	}
	// Documents switch to the new generation at the schema change (E28);
	// the read_ts reported is the collection's (E56).
	if s := e.safeLocked(c); s > readTs {
		readTs = s
	}
	resp := &apiv1.GetDocumentResponse{ReadTs: readTs}
	ent, ok := c.docs.Get(req.GetPrimaryKey())
	if !ok || ent.Deleted {
		return resp, nil
	}
	resp.Found = true
	resp.Document = &apiv1.Document{PrimaryKey: req.GetPrimaryKey(), Fields: ent.FieldMap(), CommitTs: ent.Version, SourcePartition: ent.Partition}
	return resp, nil
}

// Scan returns up to limit live documents passing filters in primary-key
// order after the key `after` (exclusive, "" = from the start), for the
// document modality's "scan with simple filters".
func (e *Emulator) Scan(ctx context.Context, collection string, filters []*apiv1.Filter, after string, limit int) ([]*apiv1.Document, uint64, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	c := e.colls[collection]
	if c == nil || !c.active() {
		return nil, 0, notFound(collection, "collection")
	}
	fs, err := compileFilters(c.schema, filters)
	if err != nil {
		return nil, 0, err
	}
	var out []*apiv1.Document
	var sc docstore.Scratch
	c.docs.Ascend(after, func(pk string, ent *docstore.Entry) bool {
		if len(out) >= limit {
			return false
		}
		if fs.match(ent, &sc) {
			out = append(out, &apiv1.Document{PrimaryKey: pk, Fields: ent.FieldMap(), CommitTs: ent.Version, SourcePartition: ent.Partition})
		}
		return true
	})
	return out, e.safeLocked(c), nil
}
