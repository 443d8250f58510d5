package emulator

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/prototext"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
)

var bg = context.Background()

// fakeClock is a manually advanced Clock.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
}

type fakeWaiter struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.waiters = append(c.waiters, fakeWaiter{at: c.now.Add(d), ch: ch})
	return ch
}

func (c *fakeClock) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	keep := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(c.now) {
			w.ch <- c.now
		} else {
			keep = append(keep, w)
		}
	}
	c.waiters = keep
}

// ---- builders ----

func val(k any) *apiv1.Value {
	switch x := k.(type) {
	case int:
		return &apiv1.Value{Kind: &apiv1.Value_Int64Value{Int64Value: int64(x)}}
	case int64:
		return &apiv1.Value{Kind: &apiv1.Value_Int64Value{Int64Value: x}}
	case uint64:
		return &apiv1.Value{Kind: &apiv1.Value_Uint64Value{Uint64Value: x}}
	case float64:
		return &apiv1.Value{Kind: &apiv1.Value_DoubleValue{DoubleValue: x}}
	case string:
		return &apiv1.Value{Kind: &apiv1.Value_StringValue{StringValue: x}}
	case bool:
		return &apiv1.Value{Kind: &apiv1.Value_BoolValue{BoolValue: x}}
	case []float32:
		return &apiv1.Value{Kind: &apiv1.Value_VectorValue{VectorValue: &apiv1.FloatVector{Values: x}}}
	case nil:
		return &apiv1.Value{Kind: &apiv1.Value_NullValue{NullValue: true}}
	}
	panic(fmt.Sprintf("val(%T)", k))
}

// itemsDef: id INT pk, title TEXT, tag KEYWORD, price FLOAT NUMERIC, emb VECTOR(3).
func itemsDef(name string, parts ...string) *apiv1.CollectionDefinition {
	if len(parts) == 0 {
		parts = []string{"table:100"}
	}
	return &apiv1.CollectionDefinition{
		Name: name,
		Fields: []*apiv1.Field{
			{Name: "id", Type: apiv1.FieldType_FIELD_TYPE_INT, Role: apiv1.FieldRole_FIELD_ROLE_PRIMARY_KEY, SourceColumnId: 1},
			{Name: "title", Type: apiv1.FieldType_FIELD_TYPE_STRING, Role: apiv1.FieldRole_FIELD_ROLE_TEXT, SourceColumnId: 2},
			{Name: "tag", Type: apiv1.FieldType_FIELD_TYPE_STRING, Role: apiv1.FieldRole_FIELD_ROLE_KEYWORD, SourceColumnId: 3},
			{Name: "price", Type: apiv1.FieldType_FIELD_TYPE_FLOAT, Role: apiv1.FieldRole_FIELD_ROLE_NUMERIC, SourceColumnId: 4},
			{Name: "emb", Type: apiv1.FieldType_FIELD_TYPE_VECTOR, Role: apiv1.FieldRole_FIELD_ROLE_VECTOR, VectorDim: 3, SourceColumnId: 5},
		},
		PrimaryKey:       []string{"id"},
		SourcePartitions: parts,
		Source:           &apiv1.SourceTable{Database: "shop", Table: name, LogicalTableId: 100},
		MetadataAux:      true,
	}
}

// docDef: a document-only collection: id INT pk, body STRING stored.
func docDef(name string, parts ...string) *apiv1.CollectionDefinition {
	if len(parts) == 0 {
		parts = []string{"table:200"}
	}
	return &apiv1.CollectionDefinition{
		Name: name,
		Fields: []*apiv1.Field{
			{Name: "id", Type: apiv1.FieldType_FIELD_TYPE_INT, Role: apiv1.FieldRole_FIELD_ROLE_PRIMARY_KEY},
			{Name: "body", Type: apiv1.FieldType_FIELD_TYPE_STRING, Role: apiv1.FieldRole_FIELD_ROLE_STORED_ONLY},
			{Name: "n", Type: apiv1.FieldType_FIELD_TYPE_INT, Role: apiv1.FieldRole_FIELD_ROLE_NUMERIC},
		},
		PrimaryKey:       []string{"id"},
		SourcePartitions: parts,
	}
}

func metaK(key string) *apiv1.RequestMeta {
	return &apiv1.RequestMeta{IdempotencyKey: key, ClientId: "ddl-1", ClientKind: apiv1.ClientKind_CLIENT_KIND_TIDB_DDL_ADAPTER}
}

func createReq(def *apiv1.CollectionDefinition, ddlTs uint64) *apiv1.PutCollectionSchemaRequest {
	return &apiv1.PutCollectionSchemaRequest{
		Meta:          metaK(fmt.Sprintf("create-%s-%d", def.GetName(), ddlTs)),
		Scope:         &apiv1.SchemaScope{Collection: def.GetName(), DdlCommitTs: ddlTs},
		SchemaVersion: 1,
		Fence:         &apiv1.SchemaFence{SchemaGenerationToken: apiv1.InitialGenerationToken, EnforceMonotonicApply: true},
		Definition:    def,
		UpdatePolicy:  apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_INITIAL_CREATION,
	}
}

// changeReq builds the next-generation request against lin.
func changeReq(def *apiv1.CollectionDefinition, lin *apiv1.Lineage, ddlTs uint64, policy apiv1.SchemaUpdatePolicy) *apiv1.PutCollectionSchemaRequest {
	name := def.GetName()
	return &apiv1.PutCollectionSchemaRequest{
		Meta:          metaK(fmt.Sprintf("ddl-%s-%d", name, ddlTs)),
		Scope:         &apiv1.SchemaScope{Collection: name, DdlCommitTs: ddlTs},
		SchemaVersion: lin.GetSchemaVersion() + 1,
		Fence:         &apiv1.SchemaFence{ExpectedPrevSchemaVersion: lin.GetSchemaVersion(), SchemaGenerationToken: lin.GetSchemaGenerationToken(), EnforceMonotonicApply: true},
		Definition:    def,
		UpdatePolicy:  policy,
	}
}

func itemUpsert(seq, ts uint64, id int, title, tag string, price float64, emb []float32) *apiv1.Mutation {
	f := map[string]*apiv1.Value{"id": val(id), "title": val(title), "tag": val(tag), "price": val(price)}
	if emb != nil {
		f["emb"] = val(emb)
	}
	return &apiv1.Mutation{Seq: seq, CommitTs: ts, Kind: apiv1.MutationKind_MUTATION_KIND_UPSERT, PrimaryKey: fmt.Sprint(id), Fields: f}
}

func docUpsert(seq, ts uint64, id int, body string) *apiv1.Mutation {
	return &apiv1.Mutation{Seq: seq, CommitTs: ts, Kind: apiv1.MutationKind_MUTATION_KIND_UPSERT, PrimaryKey: fmt.Sprint(id),
		Fields: map[string]*apiv1.Value{"id": val(id), "body": val(body), "n": val(id % 10)}}
}

func del(seq, ts uint64, id int) *apiv1.Mutation {
	return &apiv1.Mutation{Seq: seq, CommitTs: ts, Kind: apiv1.MutationKind_MUTATION_KIND_DELETE, PrimaryKey: fmt.Sprint(id)}
}

func mb(part string, epoch uint64, token string, muts ...*apiv1.Mutation) *apiv1.MutationBatch {
	b := &apiv1.MutationBatch{SourcePartition: part, SourceEpoch: epoch, SchemaGenerationToken: token, Mutations: muts}
	if len(muts) > 0 {
		b.FirstSeq = muts[0].GetSeq()
	}
	return b
}

func openMem(t testing.TB, opts Options) *Emulator {
	t.Helper()
	e, err := Open("", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func mustCreate(t testing.TB, e *Emulator, def *apiv1.CollectionDefinition, ddlTs uint64) *apiv1.Lineage {
	t.Helper()
	resp, err := e.PutCollectionSchema(bg, createReq(def, ddlTs))
	if err != nil {
		t.Fatalf("create %s: %v", def.GetName(), err)
	}
	return resp.GetLineage()
}

func mustIngest(t testing.TB, e *Emulator, b *apiv1.MutationBatch) *apiv1.IngestResponse {
	t.Helper()
	resp, err := e.Ingest(bg, b)
	if err != nil {
		t.Fatalf("ingest: %v", err)
	}
	return resp
}

func mustAdvance(t testing.TB, e *Emulator, part string, epoch, ts uint64) {
	t.Helper()
	if _, err := e.AdvancePartition(bg, &apiv1.PartitionProgress{SourcePartition: part, SourceEpoch: epoch, ResolvedTs: ts}); err != nil {
		t.Fatalf("advance %s: %v", part, err)
	}
}

// requireReason asserts a contract error with reason and field, and that its
// message carries expected/actual when given.
func requireReason(t testing.TB, rule string, err error, reason Reason, field string) *Error {
	t.Helper()
	ce, ok := err.(*Error)
	if !ok {
		t.Fatalf("%s: want %s at %q, got %T %v", rule, reason, field, err, err)
	}
	if ce.Reason != reason || (field != "" && ce.Field != field) {
		t.Fatalf("%s: want %s at %q, got %v", rule, reason, field, err)
	}
	return ce
}

// dump renders the whole observable state (catalog, lineage, progress,
// every live document and tombstone count) deterministically.
func dump(t testing.TB, e *Emulator) string {
	t.Helper()
	var b strings.Builder
	list, err := e.ListCollections(bg, &apiv1.ListCollectionsRequest{IncludeDropped: true})
	if err != nil {
		t.Fatal(err)
	}
	opts := prototext.MarshalOptions{}
	for _, c := range list.GetCollections() {
		b.WriteString(opts.Format(c))
		b.WriteString("\n")
		if c.GetState() != apiv1.CollectionState_COLLECTION_STATE_ACTIVE {
			continue
		}
		docs, _, err := e.Scan(bg, c.GetDefinition().GetName(), nil, "", 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			keys := make([]string, 0, len(d.GetFields()))
			for k := range d.GetFields() {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			fmt.Fprintf(&b, "  doc %s v%d p=%s", d.GetPrimaryKey(), d.GetCommitTs(), d.GetSourcePartition())
			for _, k := range keys {
				fmt.Fprintf(&b, " %s=%s", k, opts.Format(d.GetFields()[k]))
			}
			b.WriteString("\n")
		}
	}
	prog, _ := e.GetProgress(bg, &apiv1.GetProgressRequest{})
	for _, p := range prog.GetPartitions() {
		b.WriteString(opts.Format(p))
		b.WriteString("\n")
	}
	return b.String()
}
