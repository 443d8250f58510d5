package emulator

import (
	"context"
	"crypto/sha256"
	"fmt"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
	"github.com/searchfabric/sfemu/emulator/docstore"
	"github.com/searchfabric/sfemu/emulator/storage"
)

// PutCollectionSchema creates, changes or drops a collection (E20..E31).
func (e *Emulator) PutCollectionSchema(ctx context.Context, req *apiv1.PutCollectionSchemaRequest) (*apiv1.PutCollectionSchemaResponse, error) {
	resp, err := e.putSchema(req)
	return resp, e.reject("put_collection_schema", err)
}

func (e *Emulator) putSchema(req *apiv1.PutCollectionSchemaRequest) (*apiv1.PutCollectionSchemaResponse, error) {
	if err := contract.ValidateMeta(req.GetMeta()); err != nil {
		return nil, err
	}
	reqBytes, err := proto.MarshalOptions{Deterministic: true}.Marshal(req)
	if err != nil {
		return nil, contract.Errf(contract.ReasonInvalidArgument, "", "", "", "request does not marshal: %v", err)
	}
	digest := sha256.Sum256(reqBytes)
	idemKey := storage.IdempotencyKey(req.GetMeta().GetClientId(), req.GetMeta().GetIdempotencyKey())

	e.wmu.Lock()
	defer e.wmu.Unlock()
	if err := e.writableLocked(); err != nil {
		return nil, err
	}
	// E22: replays answer from the record, before any lineage check.
	if rec, ok := e.idem[string(idemKey)]; ok {
		if rec.Digest != digest {
			return nil, contract.Errf(contract.ReasonIdempotencyConflict, "meta.idempotency_key", "the content of the original request", "different content",
				"idempotency key %q of client %q was used for another request", req.GetMeta().GetIdempotencyKey(), req.GetMeta().GetClientId())
		}
		resp := &apiv1.PutCollectionSchemaResponse{}
		if err := proto.Unmarshal(rec.Response, resp); err != nil {
			return nil, contract.Errf(contract.ReasonInternal, "", "", "", "stored response: %v", err)
		}
		resp.Replayed = true
		return resp, nil
	}

	name := req.GetScope().GetCollection()
	prev := e.colls[name]
	cur := contract.Current{}
	if prev != nil {
		cur.Active = prev.active()
		cur.Lineage = prev.rec.GetLineage()
		cur.Definition = prev.rec.GetDefinition()
	}
	if err := contract.CheckSchemaRequest(cur, req); err != nil {
		return nil, err
	}
	policy := req.GetUpdatePolicy()
	isDrop := policy == apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_DROP
	if !isDrop {
		for i, p := range req.GetDefinition().GetSourcePartitions() {
			if ps := e.parts[p]; ps != nil && ps.GetCollection() != name {
				return nil, contract.Errf(contract.ReasonPartitionConflict, fmt.Sprintf("definition.source_partitions[%d]", i), "an unmapped partition", p+" mapped to "+ps.GetCollection(), "partition already feeds another collection")
			}
		}
	}

	// New lineage (E26).
	var gen uint64 = 1
	if prev != nil {
		gen = prev.rec.GetLineage().GetGeneration() + 1
	}
	lin := &apiv1.Lineage{
		SchemaVersion:         req.GetSchemaVersion(),
		SchemaGenerationToken: fmt.Sprintf("g%d-v%d-t%d", gen, req.GetSchemaVersion(), req.GetScope().GetDdlCommitTs()),
		LastDdlCommitTs:       req.GetScope().GetDdlCommitTs(),
		LastUpdatePolicy:      policy,
		Generation:            gen,
	}
	def := req.GetDefinition()
	state := apiv1.CollectionState_COLLECTION_STATE_ACTIVE
	if isDrop {
		def = proto.Clone(prev.rec.GetDefinition()).(*apiv1.CollectionDefinition)
		state = apiv1.CollectionState_COLLECTION_STATE_DROPPED
	} else {
		def = proto.Clone(def).(*apiv1.CollectionDefinition)
	}
	rec := &apiv1.CollectionStatus{Definition: def, Lineage: lin, State: state}

	// Partition changes (E29, E30).
	oldParts := map[string]bool{}
	if prev != nil && prev.active() {
		for _, p := range prev.rec.GetDefinition().GetSourcePartitions() {
			oldParts[p] = true
		}
	}
	newParts := map[string]bool{}
	var addParts []*apiv1.PartitionState
	if !isDrop {
		for _, p := range def.GetSourcePartitions() {
			newParts[p] = true
			if oldParts[p] {
				continue
			}
			ps := &apiv1.PartitionState{SourcePartition: p, Collection: name}
			if policy != apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_INITIAL_CREATION {
				ps.ResolvedTs = req.GetScope().GetDdlCommitTs()
			}
			addParts = append(addParts, ps)
		}
	}
	var removedParts []string
	for _, p := range sortedKeys(oldParts) {
		if !newParts[p] {
			removedParts = append(removedParts, p)
		}
	}

	// Document actions (E28).
	var docs *docstore.Store
	var rewrites []docstore.Change // entries to write (New) or delete (New == nil)
	clearDocs := false
	var kept, removed uint64
	switch policy {
	case apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_INITIAL_CREATION:
		docs = docstore.New()
		clearDocs = true // a dropped name may have left nothing, but be sure
	case apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_ADDITIVE:
		docs = prev.docs
		kept = uint64(docs.Live())
	case apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_IN_PLACE:
		docs, rewrites, kept, removed = projectDocs(prev.docs, contract.NewSchema(def), removedParts)
	case apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_FULL, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_DROP:
		docs = docstore.New()
		clearDocs = true
		removed = uint64(prev.docs.Live())
	}
	resp := &apiv1.PutCollectionSchemaResponse{Collection: name, Lineage: lin, DocumentsKept: kept, DocumentsRemoved: removed}
	respBytes, err := proto.Marshal(resp)
	if err != nil {
		return nil, contract.Errf(contract.ReasonInternal, "", "", "", "marshal response: %v", err)
	}

	err = e.persist(func(tx *storage.Tx) error {
		if err := tx.PutCollection(rec); err != nil {
			return err
		}
		if clearDocs {
			if err := tx.ClearDocs(name); err != nil {
				return err
			}
		}
		for _, ch := range rewrites {
			var err error
			if ch.New == nil {
				err = tx.DeleteEntry(name, ch.PK)
			} else {
				err = tx.PutEntry(name, ch.PK, ch.New)
			}
			if err != nil {
				return err
			}
		}
		for _, p := range removedParts {
			if err := tx.DeletePartition(p); err != nil {
				return err
			}
		}
		for _, ps := range addParts {
			if err := tx.PutPartition(ps); err != nil {
				return err
			}
		}
		return tx.PutIdempotency(idemKey, digest, respBytes)
	})
	if err != nil {
		return nil, err
	}

	// Memory (after the durable commit).
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range removedParts {
		delete(e.parts, p)
	}
	for _, ps := range addParts {
		e.parts[ps.GetSourcePartition()] = ps
	}
	e.idem[string(idemKey)] = storage.IdemRecord{Digest: digest, Response: respBytes}
	if isDrop {
		retireGen(prev.prevGen, prev)
		retireGen(prev)
		delete(e.held, name)
		e.colls[name] = &collection{rec: rec}
	} else {
		c, err := e.buildCollection(rec, docs, prev)
		if err != nil {
			// The definition was validated; building in-memory indexes
			// cannot fail for it. Treat as a storage-level failure.
			e.broken = err
			return nil, contract.Errf(contract.ReasonInternal, "", "", "", "build collection: %v", err)
		}
		e.adoptLocked(prev, c)
		e.colls[name] = c
		e.settleLocked(c)
	}
	e.bumpLocked()
	return resp, nil
}

// projectDocs is REBUILD_IN_PLACE (E28): documents of removed partitions are
// deleted, values of removed fields dropped and values that no longer fit
// their field nulled. It returns the new store and the entries that changed.
func projectDocs(old *docstore.Store, s *contract.Schema, removedParts []string) (*docstore.Store, []docstore.Change, uint64, uint64) {
	gone := map[string]bool{}
	for _, p := range removedParts {
		gone[p] = true
	}
	out := docstore.New()
	var changes []docstore.Change
	var kept, removed uint64
	old.Each(func(pk string, ent *docstore.Entry) {
		if ent.Deleted {
			out.Put(pk, ent)
			return
		}
		if gone[ent.Partition] {
			removed++
			changes = append(changes, docstore.Change{PK: pk, Old: ent})
			return
		}
		kept++
		var fields map[string]*apiv1.Value
		changed := false
		ent.Range(func(name string, v *apiv1.Value) bool {
			f, ok := s.Fields[name]
			if !ok {
				changed = true
				return true
			}
			if contract.CheckValue(f, v, name) != nil {
				v = &apiv1.Value{Kind: &apiv1.Value_NullValue{NullValue: true}}
				changed = true
			}
			if fields == nil {
				fields = make(map[string]*apiv1.Value, ent.NumFields())
			}
			fields[name] = v
			return true
		})
		if !changed {
			out.Put(pk, ent)
			return
		}
		// Compact in the new definition's layout (E45); the values
		// passed CheckValue above, so encoding them cannot fail, and the
		// map form would serve alike if it did.
		ne, err := docstore.NewMapEntry(ent.Version, s.Layout, fields, ent.Partition)
		if err != nil {
			ne = &docstore.Entry{Version: ent.Version, Fields: fields, Partition: ent.Partition}
		}
		out.Put(pk, ne)
		changes = append(changes, docstore.Change{PK: pk, Old: ent, New: ne})
	})
	return out, changes, kept, removed
}
