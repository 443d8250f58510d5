package normalize

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
	"github.com/searchfabric/sfemu/normalize/ddlmap"
)

// fakeSink is a small stand-in for the emulator that enforces the contract
// rules the bridge depends on (E22-E25, E30, E33-E35, E38, E50) and records
// every call. The end-to-end test runs against the real emulator.
type fakeSink struct {
	mu      sync.Mutex
	colls   map[string]*fakeColl
	parts   map[string]*apiv1.PartitionState // by partition
	idem    map[string]fakeIdem
	gen     map[string]uint64
	puts    []*apiv1.PutCollectionSchemaRequest
	batches []*apiv1.MutationBatch
	advs    []*apiv1.PartitionProgress
	calls   []string // "put:<coll>", "ingest:<part>", "adv:<part>"

	failPut    int // fail the next n PutCollectionSchema calls
	failIngest int
}

type fakeIdem struct {
	req  []byte
	resp *apiv1.PutCollectionSchemaResponse
}

type fakeColl struct {
	def     *apiv1.CollectionDefinition
	lineage *apiv1.Lineage
	docs    map[string]*apiv1.Mutation // live docs and tombstones (kind DELETE)
}

func newFakeSink() *fakeSink {
	return &fakeSink{colls: map[string]*fakeColl{}, parts: map[string]*apiv1.PartitionState{},
		idem: map[string]fakeIdem{}, gen: map[string]uint64{}}
}

func (f *fakeSink) PutCollectionSchema(_ context.Context, req *apiv1.PutCollectionSchemaRequest) (*apiv1.PutCollectionSchemaResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.puts = append(f.puts, proto.Clone(req).(*apiv1.PutCollectionSchemaRequest))
	f.calls = append(f.calls, "put:"+req.GetScope().GetCollection())
	if f.failPut > 0 {
		f.failPut--
		return nil, fmt.Errorf("injected put failure")
	}
	raw, _ := proto.MarshalOptions{Deterministic: true}.Marshal(req)
	ik := req.GetMeta().GetClientId() + "\x00" + req.GetMeta().GetIdempotencyKey()
	if prev, ok := f.idem[ik]; ok {
		if string(prev.req) != string(raw) {
			return nil, fmt.Errorf("IDEMPOTENCY_CONFLICT")
		}
		r := proto.Clone(prev.resp).(*apiv1.PutCollectionSchemaResponse)
		r.Replayed = true
		return r, nil
	}
	if req.GetMeta().GetIdempotencyKey() == "" || req.GetMeta().GetClientId() == "" ||
		req.GetMeta().GetClientKind() != apiv1.ClientKind_CLIENT_KIND_TIDB_DDL_ADAPTER {
		return nil, fmt.Errorf("INVALID_META")
	}
	if req.GetUpdatePolicy() == apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_UNSPECIFIED {
		return nil, fmt.Errorf("UNSPECIFIED_POLICY")
	}
	name := req.GetScope().GetCollection()
	c := f.colls[name]
	if req.GetUpdatePolicy() == apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_INITIAL_CREATION {
		if c != nil {
			return nil, fmt.Errorf("ALREADY_EXISTS")
		}
		fe := req.GetFence()
		if req.GetSchemaVersion() != 1 || fe.GetExpectedPrevSchemaVersion() != 0 ||
			fe.GetSchemaGenerationToken() != apiv1.InitialGenerationToken || !fe.GetEnforceMonotonicApply() {
			return nil, fmt.Errorf("INVALID_ZERO_STATE")
		}
		c = &fakeColl{docs: map[string]*apiv1.Mutation{}, lineage: &apiv1.Lineage{}}
		f.colls[name] = c
	} else {
		if c == nil {
			return nil, fmt.Errorf("COLLECTION_NOT_FOUND")
		}
		fe := req.GetFence()
		if fe.GetExpectedPrevSchemaVersion() != c.lineage.GetSchemaVersion() || fe.GetSchemaGenerationToken() != c.lineage.GetSchemaGenerationToken() {
			return nil, fmt.Errorf("FENCE_MISMATCH: expected %d/%s got %d/%s", c.lineage.GetSchemaVersion(), c.lineage.GetSchemaGenerationToken(),
				fe.GetExpectedPrevSchemaVersion(), fe.GetSchemaGenerationToken())
		}
		if fe.GetEnforceMonotonicApply() && (req.GetSchemaVersion() <= c.lineage.GetSchemaVersion() ||
			req.GetScope().GetDdlCommitTs() < c.lineage.GetLastDdlCommitTs()) {
			return nil, fmt.Errorf("NON_MONOTONIC_SCHEMA")
		}
		if want := ddlmap.ClassifyDiff(c.def, req.GetDefinition()); req.GetUpdatePolicy() != apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_DROP &&
			contract.PolicyRank(req.GetUpdatePolicy()) < contract.PolicyRank(want) {
			return nil, fmt.Errorf("POLICY_TOO_WEAK")
		}
	}
	f.gen[name]++
	resp := &apiv1.PutCollectionSchemaResponse{Collection: name}
	if req.GetUpdatePolicy() == apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_DROP {
		for _, p := range c.def.GetSourcePartitions() {
			delete(f.parts, p)
		}
		delete(f.colls, name)
		resp.Lineage = &apiv1.Lineage{}
	} else {
		old := c.def
		c.def = req.GetDefinition()
		c.lineage = &apiv1.Lineage{SchemaVersion: req.GetSchemaVersion(), SchemaGenerationToken: fmt.Sprintf("g%d-%s", f.gen[name], name),
			LastDdlCommitTs: req.GetScope().GetDdlCommitTs(), LastUpdatePolicy: req.GetUpdatePolicy(), Generation: f.gen[name]}
		if req.GetUpdatePolicy() == apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_FULL {
			c.docs = map[string]*apiv1.Mutation{}
		}
		oldP := map[string]bool{}
		for _, p := range old.GetSourcePartitions() {
			oldP[p] = true
		}
		newP := map[string]bool{}
		for _, p := range c.def.GetSourcePartitions() {
			newP[p] = true
			if old != nil && !oldP[p] {
				f.parts[p] = &apiv1.PartitionState{SourcePartition: p, Collection: name, ResolvedTs: req.GetScope().GetDdlCommitTs()}
			}
		}
		for p := range oldP {
			if !newP[p] {
				delete(f.parts, p)
			}
		}
		resp.Lineage = proto.Clone(c.lineage).(*apiv1.Lineage)
	}
	f.idem[ik] = fakeIdem{req: raw, resp: resp}
	return proto.Clone(resp).(*apiv1.PutCollectionSchemaResponse), nil
}

func (f *fakeSink) collOf(partition string) (string, *fakeColl) {
	for name, c := range f.colls {
		for _, p := range c.def.GetSourcePartitions() {
			if p == partition {
				return name, c
			}
		}
	}
	return "", nil
}

func (f *fakeSink) Ingest(_ context.Context, b *apiv1.MutationBatch) (*apiv1.IngestResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.batches = append(f.batches, proto.Clone(b).(*apiv1.MutationBatch))
	f.calls = append(f.calls, "ingest:"+b.GetSourcePartition())
	if f.failIngest > 0 {
		f.failIngest--
		return nil, fmt.Errorf("injected ingest failure")
	}
	name, c := f.collOf(b.GetSourcePartition())
	if c == nil {
		return nil, fmt.Errorf("PARTITION_NOT_MAPPED %s", b.GetSourcePartition())
	}
	st := f.parts[b.GetSourcePartition()]
	if st == nil {
		st = &apiv1.PartitionState{SourcePartition: b.GetSourcePartition(), Collection: name}
	}
	if b.GetSourceEpoch() < 1 || b.GetSourceEpoch() < st.GetSourceEpoch() {
		return nil, fmt.Errorf("EPOCH_REGRESSION")
	}
	last := st.GetLastSeq()
	if b.GetSourceEpoch() > st.GetSourceEpoch() {
		last = 0
	}
	for i, m := range b.GetMutations() {
		if m.GetSeq() != b.GetFirstSeq()+uint64(i) {
			return nil, fmt.Errorf("INVALID_BATCH")
		}
	}
	end := b.GetFirstSeq() + uint64(len(b.GetMutations())) - 1
	if end <= last {
		return &apiv1.IngestResponse{Collection: name, Outcome: apiv1.IngestOutcome_INGEST_OUTCOME_REPLAY_NOOP, LastSeq: last}, nil
	}
	if b.GetFirstSeq() != last+1 {
		return nil, fmt.Errorf("SEQ_GAP/OVERLAP: last %d first %d", last, b.GetFirstSeq())
	}
	if b.GetSchemaGenerationToken() != c.lineage.GetSchemaGenerationToken() {
		return nil, fmt.Errorf("STALE_GENERATION: want %s got %s", c.lineage.GetSchemaGenerationToken(), b.GetSchemaGenerationToken())
	}
	known := map[string]bool{}
	for _, f := range c.def.GetFields() {
		known[f.GetName()] = true
	}
	for _, m := range b.GetMutations() {
		if m.GetKind() == apiv1.MutationKind_MUTATION_KIND_UPSERT {
			for name := range m.GetFields() {
				if !known[name] {
					return nil, fmt.Errorf("UNKNOWN_FIELD %s (seq %d, commit_ts %d)", name, m.GetSeq(), m.GetCommitTs())
				}
			}
		}
	}
	for _, m := range b.GetMutations() {
		if old, ok := c.docs[m.GetPrimaryKey()]; ok && m.GetCommitTs() < old.GetCommitTs() {
			continue
		}
		c.docs[m.GetPrimaryKey()] = m
	}
	st.SourceEpoch, st.LastSeq = b.GetSourceEpoch(), end
	f.parts[b.GetSourcePartition()] = st
	return &apiv1.IngestResponse{Collection: name, Outcome: apiv1.IngestOutcome_INGEST_OUTCOME_APPLIED, SourceEpoch: st.SourceEpoch, LastSeq: end}, nil
}

func (f *fakeSink) AdvancePartition(_ context.Context, p *apiv1.PartitionProgress) (*apiv1.AdvancePartitionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.advs = append(f.advs, proto.Clone(p).(*apiv1.PartitionProgress))
	f.calls = append(f.calls, "adv:"+p.GetSourcePartition())
	name, c := f.collOf(p.GetSourcePartition())
	if c == nil {
		return nil, fmt.Errorf("PARTITION_NOT_MAPPED")
	}
	st := f.parts[p.GetSourcePartition()]
	if st == nil {
		st = &apiv1.PartitionState{SourcePartition: p.GetSourcePartition(), Collection: name}
	}
	if p.GetSourceEpoch() < st.GetSourceEpoch() {
		return nil, fmt.Errorf("EPOCH_REGRESSION")
	}
	if p.GetResolvedTs() < st.GetResolvedTs() {
		return nil, fmt.Errorf("PROGRESS_REGRESSION")
	}
	if p.GetSourceEpoch() > st.GetSourceEpoch() {
		st.LastSeq = 0
	}
	st.SourceEpoch, st.ResolvedTs = p.GetSourceEpoch(), p.GetResolvedTs()
	f.parts[p.GetSourcePartition()] = st
	return &apiv1.AdvancePartitionResponse{Collection: name}, nil
}

func (f *fakeSink) GetProgress(_ context.Context, req *apiv1.GetProgressRequest) (*apiv1.GetProgressResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &apiv1.GetProgressResponse{}
	for _, p := range req.GetSourcePartitions() {
		if st, ok := f.parts[p]; ok {
			resp.Partitions = append(resp.Partitions, proto.Clone(st).(*apiv1.PartitionState))
		}
	}
	return resp, nil
}

func (f *fakeSink) ListCollections(_ context.Context, _ *apiv1.ListCollectionsRequest) (*apiv1.ListCollectionsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &apiv1.ListCollectionsResponse{}
	var names []string
	for n := range f.colls {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c := f.colls[n]
		resp.Collections = append(resp.Collections, &apiv1.CollectionStatus{
			Definition: c.def, Lineage: c.lineage, State: apiv1.CollectionState_COLLECTION_STATE_ACTIVE})
	}
	return resp, nil
}

// docs returns the live documents of a collection: pk -> commit_ts.
func (f *fakeSink) liveDocs(coll string) map[string]*apiv1.Mutation {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]*apiv1.Mutation{}
	c := f.colls[coll]
	if c == nil {
		return out
	}
	for k, m := range c.docs {
		if m.GetKind() == apiv1.MutationKind_MUTATION_KIND_UPSERT {
			out[k] = m
		}
	}
	return out
}
