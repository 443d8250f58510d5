package contract

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"google.golang.org/protobuf/proto"
)

func baseDef() *apiv1.CollectionDefinition {
	return &apiv1.CollectionDefinition{
		Name: "items",
		Fields: []*apiv1.Field{
			{Name: "id", Type: apiv1.FieldType_FIELD_TYPE_INT, Role: apiv1.FieldRole_FIELD_ROLE_PRIMARY_KEY},
			{Name: "title", Type: apiv1.FieldType_FIELD_TYPE_STRING, Role: apiv1.FieldRole_FIELD_ROLE_TEXT},
			{Name: "emb", Type: apiv1.FieldType_FIELD_TYPE_VECTOR, Role: apiv1.FieldRole_FIELD_ROLE_VECTOR, VectorDim: 2},
			{Name: "price", Type: apiv1.FieldType_FIELD_TYPE_DECIMAL, Role: apiv1.FieldRole_FIELD_ROLE_NUMERIC},
		},
		PrimaryKey:       []string{"id"},
		SourcePartitions: []string{"table:10"},
	}
}

func mutate(d *apiv1.CollectionDefinition, f func(*apiv1.CollectionDefinition)) *apiv1.CollectionDefinition {
	c := proto.Clone(d).(*apiv1.CollectionDefinition)
	f(c)
	return c
}

// E3, E11, E12, E13.
func TestValidateDefinition(t *testing.T) {
	if err := ValidateDefinition(baseDef(), "definition"); err != nil {
		t.Fatalf("valid definition rejected: %v", err)
	}
	cases := []struct {
		rule, field string
		mut         func(*apiv1.CollectionDefinition)
	}{
		{"E3", "definition.name", func(d *apiv1.CollectionDefinition) { d.Name = "a/b" }},
		{"E3", "definition.name", func(d *apiv1.CollectionDefinition) { d.Name = "" }},
		{"E12", "definition.fields", func(d *apiv1.CollectionDefinition) { d.Fields = nil }},
		{"E12", "definition.fields[1].name", func(d *apiv1.CollectionDefinition) { d.Fields[1].Name = "id" }},
		{"E12", "definition.fields[1].type", func(d *apiv1.CollectionDefinition) { d.Fields[1].Type = 0 }},
		{"E12", "definition.fields[1].role", func(d *apiv1.CollectionDefinition) { d.Fields[1].Role = 0 }},
		{"E11", "definition.fields[2].vector_dim", func(d *apiv1.CollectionDefinition) { d.Fields[2].VectorDim = 0 }},
		{"E11", "definition.fields[1].vector_dim", func(d *apiv1.CollectionDefinition) { d.Fields[1].VectorDim = 3 }},
		{"E11", "definition.fields[2].type", func(d *apiv1.CollectionDefinition) {
			d.Fields[2].Type = apiv1.FieldType_FIELD_TYPE_STRING
			d.Fields[2].VectorDim = 0
		}},
		{"E11", "definition.fields[1].type", func(d *apiv1.CollectionDefinition) { d.Fields[1].Type = apiv1.FieldType_FIELD_TYPE_INT }},
		{"E12", "definition.primary_key", func(d *apiv1.CollectionDefinition) {
			d.PrimaryKey = nil
			d.Fields[0].Role = apiv1.FieldRole_FIELD_ROLE_STORED_ONLY
		}},
		{"E12", "definition.primary_key[0]", func(d *apiv1.CollectionDefinition) { d.PrimaryKey = []string{"nope"} }},
		{"E12", "definition.primary_key[1]", func(d *apiv1.CollectionDefinition) { d.PrimaryKey = []string{"id", "id"} }},
		{"E12", "definition.primary_key[1]", func(d *apiv1.CollectionDefinition) { d.PrimaryKey = []string{"id", "title"} }},
		{"E12", "definition.fields[1].role", func(d *apiv1.CollectionDefinition) { d.Fields[1].Role = apiv1.FieldRole_FIELD_ROLE_PRIMARY_KEY }},
		{"E13", "definition.source_partitions", func(d *apiv1.CollectionDefinition) { d.SourcePartitions = nil }},
		{"E13", "definition.source_partitions[0]", func(d *apiv1.CollectionDefinition) { d.SourcePartitions = []string{"t10"} }},
		{"E13", "definition.source_partitions[1]", func(d *apiv1.CollectionDefinition) { d.SourcePartitions = []string{"table:10", "table:10"} }},
	}
	for _, c := range cases {
		err := ValidateDefinition(mutate(baseDef(), c.mut), "definition")
		ce, ok := err.(*Error)
		if !ok || ce.Reason != ReasonInvalidDefinition || ce.Field != c.field {
			t.Errorf("%s: want INVALID_DEFINITION at %s, got %v", c.rule, c.field, err)
		}
	}
}

func TestModalitiesE11(t *testing.T) {
	d := baseDef()
	got := Modalities(d)
	want := []apiv1.Modality{apiv1.Modality_MODALITY_DOCUMENT, apiv1.Modality_MODALITY_TEXT, apiv1.Modality_MODALITY_VECTOR}
	if len(got) != len(want) {
		t.Fatalf("modalities %v want %v", got, want)
	}
	d.MetadataAux = true
	d.Fields = d.Fields[:1]
	got = Modalities(d)
	if len(got) != 2 || got[1] != apiv1.Modality_MODALITY_METADATA_AUX {
		t.Fatalf("modalities %v", got)
	}
	if ModalityName(apiv1.Modality_MODALITY_METADATA_AUX) != "metadata_aux" {
		t.Fatal("modality name")
	}
}

// E27.
func TestRequiredPolicy(t *testing.T) {
	add := apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_ADDITIVE
	inPlace := apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_IN_PLACE
	full := apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_FULL
	cases := []struct {
		name string
		mut  func(*apiv1.CollectionDefinition)
		want apiv1.SchemaUpdatePolicy
	}{
		{"no change", func(d *apiv1.CollectionDefinition) {}, add},
		{"add field", func(d *apiv1.CollectionDefinition) {
			d.Fields = append(d.Fields, &apiv1.Field{Name: "x", Type: apiv1.FieldType_FIELD_TYPE_INT, Role: apiv1.FieldRole_FIELD_ROLE_STORED_ONLY})
		}, add},
		{"add partition", func(d *apiv1.CollectionDefinition) { d.SourcePartitions = append(d.SourcePartitions, "table:11") }, add},
		{"rename source (E10: source is metadata)", func(d *apiv1.CollectionDefinition) { d.Source = &apiv1.SourceTable{Table: "t2"} }, add},
		{"toggle aux", func(d *apiv1.CollectionDefinition) { d.MetadataAux = true }, add},
		{"drop field", func(d *apiv1.CollectionDefinition) { d.Fields = d.Fields[:3] }, inPlace},
		{"type change", func(d *apiv1.CollectionDefinition) { d.Fields[3].Type = apiv1.FieldType_FIELD_TYPE_FLOAT }, inPlace},
		{"role change", func(d *apiv1.CollectionDefinition) { d.Fields[1].Role = apiv1.FieldRole_FIELD_ROLE_KEYWORD }, inPlace},
		{"dim change", func(d *apiv1.CollectionDefinition) { d.Fields[2].VectorDim = 3 }, inPlace},
		{"metric change", func(d *apiv1.CollectionDefinition) { d.Fields[2].VectorMetric = apiv1.VectorMetric_VECTOR_METRIC_L2 }, inPlace},
		{"remove partition", func(d *apiv1.CollectionDefinition) { d.SourcePartitions = []string{"table:12"} }, inPlace},
		{"pk type", func(d *apiv1.CollectionDefinition) { d.Fields[0].Type = apiv1.FieldType_FIELD_TYPE_STRING }, full},
		{"pk composite", func(d *apiv1.CollectionDefinition) {
			d.Fields[1].Role = apiv1.FieldRole_FIELD_ROLE_PRIMARY_KEY
			d.PrimaryKey = []string{"id", "title"}
		}, full},
	}
	for _, c := range cases {
		if got := RequiredPolicy(baseDef(), mutate(baseDef(), c.mut)); got != c.want {
			t.Errorf("%s: required %v want %v", c.name, got, c.want)
		}
	}
}

func meta() *apiv1.RequestMeta {
	return &apiv1.RequestMeta{IdempotencyKey: "k", ClientId: "c", ClientKind: apiv1.ClientKind_CLIENT_KIND_TIDB_DDL_ADAPTER}
}

func initialReq() *apiv1.PutCollectionSchemaRequest {
	return &apiv1.PutCollectionSchemaRequest{
		Meta: meta(), Scope: &apiv1.SchemaScope{Collection: "items", DdlCommitTs: 100}, SchemaVersion: 1,
		Fence:        &apiv1.SchemaFence{ExpectedPrevSchemaVersion: 0, SchemaGenerationToken: apiv1.InitialGenerationToken, EnforceMonotonicApply: true},
		Definition:   baseDef(),
		UpdatePolicy: apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_INITIAL_CREATION,
	}
}

func wantErr(t *testing.T, rule string, err error, reason Reason, field string) {
	t.Helper()
	ce, ok := err.(*Error)
	if !ok || ce.Reason != reason || ce.Field != field {
		t.Fatalf("%s: want %s at %q, got %v", rule, reason, field, err)
	}
	if !strings.Contains(ce.Error(), string(reason)) {
		t.Fatalf("%s: message %q lacks reason", rule, ce.Error())
	}
}

// E20, E21, E23..E25, E27, E31.
func TestCheckSchemaRequest(t *testing.T) {
	none := Current{}
	if err := CheckSchemaRequest(none, initialReq()); err != nil {
		t.Fatalf("zero-state tuple rejected: %v", err)
	}
	mod := func(f func(r *apiv1.PutCollectionSchemaRequest)) *apiv1.PutCollectionSchemaRequest {
		r := initialReq()
		f(r)
		return r
	}
	wantErr(t, "E20", CheckSchemaRequest(none, mod(func(r *apiv1.PutCollectionSchemaRequest) { r.Meta = nil })), ReasonInvalidMeta, "meta")
	wantErr(t, "E20", CheckSchemaRequest(none, mod(func(r *apiv1.PutCollectionSchemaRequest) { r.Meta.IdempotencyKey = "" })), ReasonInvalidMeta, "meta.idempotency_key")
	wantErr(t, "E20", CheckSchemaRequest(none, mod(func(r *apiv1.PutCollectionSchemaRequest) { r.Meta.ClientId = "" })), ReasonInvalidMeta, "meta.client_id")
	wantErr(t, "E20", CheckSchemaRequest(none, mod(func(r *apiv1.PutCollectionSchemaRequest) { r.Meta.ClientKind = 0 })), ReasonInvalidMeta, "meta.client_kind")
	wantErr(t, "E21", CheckSchemaRequest(none, mod(func(r *apiv1.PutCollectionSchemaRequest) { r.UpdatePolicy = 0 })), ReasonUnspecifiedPolicy, "update_policy")
	wantErr(t, "E21", CheckSchemaRequest(none, mod(func(r *apiv1.PutCollectionSchemaRequest) { r.Definition.Name = "other" })), ReasonInvalidDefinition, "definition.name")
	wantErr(t, "E31", CheckSchemaRequest(none, mod(func(r *apiv1.PutCollectionSchemaRequest) { r.Scope.DdlCommitTs = 0 })), ReasonInvalidArgument, "scope.ddl_commit_ts")
	wantErr(t, "E23", CheckSchemaRequest(none, mod(func(r *apiv1.PutCollectionSchemaRequest) { r.SchemaVersion = 2 })), ReasonInvalidZeroState, "schema_version")
	wantErr(t, "E23", CheckSchemaRequest(none, mod(func(r *apiv1.PutCollectionSchemaRequest) { r.Fence.ExpectedPrevSchemaVersion = 1 })), ReasonInvalidZeroState, "fence.expected_prev_schema_version")
	wantErr(t, "E23", CheckSchemaRequest(none, mod(func(r *apiv1.PutCollectionSchemaRequest) { r.Fence.SchemaGenerationToken = "x" })), ReasonInvalidZeroState, "fence.schema_generation_token")
	wantErr(t, "E23", CheckSchemaRequest(none, mod(func(r *apiv1.PutCollectionSchemaRequest) { r.Fence.EnforceMonotonicApply = false })), ReasonInvalidZeroState, "fence.enforce_monotonic_apply")
	wantErr(t, "E23", CheckSchemaRequest(none, mod(func(r *apiv1.PutCollectionSchemaRequest) {
		r.UpdatePolicy = apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_ADDITIVE
	})), ReasonCollectionNotFound, "scope.collection")

	active := Current{Active: true, Lineage: &apiv1.Lineage{SchemaVersion: 3, SchemaGenerationToken: "g3", LastDdlCommitTs: 500}, Definition: baseDef()}
	next := func(f func(r *apiv1.PutCollectionSchemaRequest)) *apiv1.PutCollectionSchemaRequest {
		r := initialReq()
		r.SchemaVersion = 4
		r.Scope.DdlCommitTs = 600
		r.Fence = &apiv1.SchemaFence{ExpectedPrevSchemaVersion: 3, SchemaGenerationToken: "g3", EnforceMonotonicApply: true}
		r.UpdatePolicy = apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_ADDITIVE
		f(r)
		return r
	}
	if err := CheckSchemaRequest(active, next(func(*apiv1.PutCollectionSchemaRequest) {})); err != nil {
		t.Fatalf("valid next generation rejected: %v", err)
	}
	wantErr(t, "E23", CheckSchemaRequest(active, initialReq()), ReasonAlreadyExists, "scope.collection")
	wantErr(t, "E24", CheckSchemaRequest(active, next(func(r *apiv1.PutCollectionSchemaRequest) { r.Fence.ExpectedPrevSchemaVersion = 2 })), ReasonFenceMismatch, "fence.expected_prev_schema_version")
	wantErr(t, "E24", CheckSchemaRequest(active, next(func(r *apiv1.PutCollectionSchemaRequest) { r.Fence.SchemaGenerationToken = "g2" })), ReasonFenceMismatch, "fence.schema_generation_token")
	wantErr(t, "E25", CheckSchemaRequest(active, next(func(r *apiv1.PutCollectionSchemaRequest) { r.SchemaVersion = 3 })), ReasonNonMonotonicSchema, "schema_version")
	wantErr(t, "E25", CheckSchemaRequest(active, next(func(r *apiv1.PutCollectionSchemaRequest) { r.Scope.DdlCommitTs = 499 })), ReasonNonMonotonicSchema, "scope.ddl_commit_ts")
	if err := CheckSchemaRequest(active, next(func(r *apiv1.PutCollectionSchemaRequest) {
		r.SchemaVersion = 1
		r.Scope.DdlCommitTs = 1
		r.Fence.EnforceMonotonicApply = false
	})); err != nil {
		t.Fatalf("E25: non-monotonic apply without enforcement rejected: %v", err)
	}
	wantErr(t, "E27", CheckSchemaRequest(active, next(func(r *apiv1.PutCollectionSchemaRequest) { r.Definition.Fields = r.Definition.Fields[:3] })), ReasonPolicyTooWeak, "update_policy")
	if err := CheckSchemaRequest(active, next(func(r *apiv1.PutCollectionSchemaRequest) {
		r.UpdatePolicy = apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_FULL
	})); err != nil {
		t.Fatalf("E27: stronger policy rejected: %v", err)
	}
	if err := CheckSchemaRequest(active, next(func(r *apiv1.PutCollectionSchemaRequest) {
		r.UpdatePolicy = apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_DROP
		r.Definition = nil
	})); err != nil {
		t.Fatalf("E30: drop rejected: %v", err)
	}
}

func mut(seq uint64) *apiv1.Mutation {
	return &apiv1.Mutation{Seq: seq, CommitTs: 10, Kind: apiv1.MutationKind_MUTATION_KIND_DELETE, PrimaryKey: "1"}
}

func batch(epoch, first uint64, n int) *apiv1.MutationBatch {
	b := &apiv1.MutationBatch{SourcePartition: "table:10", SourceEpoch: epoch, FirstSeq: first}
	for i := 0; i < n; i++ {
		b.Mutations = append(b.Mutations, mut(first+uint64(i)))
	}
	return b
}

// E33, E34.
func TestAdmitBatch(t *testing.T) {
	cur := Cursor{Epoch: 2, LastSeq: 10}
	check := func(rule string, b *apiv1.MutationBatch, want Admission, reason Reason, field string) {
		t.Helper()
		got, err := AdmitBatch(cur, b)
		if reason != "" {
			wantErr(t, rule, err, reason, field)
			return
		}
		if err != nil || got != want {
			t.Fatalf("%s: got %v, %v want %v", rule, got, err, want)
		}
	}
	check("E34 next", batch(2, 11, 3), Apply, "", "")
	check("E34 replay exact", batch(2, 8, 3), Replay, "", "")
	check("E34 replay below", batch(2, 1, 2), Replay, "", "")
	check("E34 overlap", batch(2, 9, 3), 0, ReasonSeqOverlap, "first_seq")
	check("E34 gap", batch(2, 12, 1), 0, ReasonSeqGap, "first_seq")
	check("E33 regression", batch(1, 11, 1), 0, ReasonEpochRegression, "source_epoch")
	check("E33 new epoch resets", batch(3, 1, 2), Apply, "", "")
	check("E33 new epoch gap", batch(3, 2, 2), 0, ReasonSeqGap, "first_seq")
	check("E33 zero epoch", batch(0, 1, 1), 0, ReasonInvalidBatch, "source_epoch")
	check("E34 empty", batch(2, 11, 0), 0, ReasonInvalidBatch, "mutations")
	check("E34 zero first", batch(2, 0, 1), 0, ReasonInvalidBatch, "first_seq")
	b := batch(2, 11, 3)
	b.Mutations[1].Seq = 13
	check("E34 contiguous", b, 0, ReasonInvalidBatch, "mutations[1].seq")
}

func v(k any) *apiv1.Value {
	switch x := k.(type) {
	case int64:
		return &apiv1.Value{Kind: &apiv1.Value_Int64Value{Int64Value: x}}
	case string:
		return &apiv1.Value{Kind: &apiv1.Value_StringValue{StringValue: x}}
	case []float32:
		return &apiv1.Value{Kind: &apiv1.Value_VectorValue{VectorValue: &apiv1.FloatVector{Values: x}}}
	case nil:
		return &apiv1.Value{Kind: &apiv1.Value_NullValue{NullValue: true}}
	case float64:
		return &apiv1.Value{Kind: &apiv1.Value_DoubleValue{DoubleValue: x}}
	}
	panic(k)
}

// E36, E42.
func TestCheckMutation(t *testing.T) {
	s := NewSchema(baseDef())
	ok := func() *apiv1.Mutation {
		return &apiv1.Mutation{Seq: 1, CommitTs: 5, Kind: apiv1.MutationKind_MUTATION_KIND_UPSERT, PrimaryKey: "7",
			Fields: map[string]*apiv1.Value{"id": v(int64(7)), "title": v("hi"), "emb": v([]float32{1, 2}), "price": v("-1.50")}}
	}
	if err := s.CheckMutation(ok(), "m"); err != nil {
		t.Fatalf("valid mutation rejected: %v", err)
	}
	cases := []struct {
		mut    func(*apiv1.Mutation)
		reason Reason
		field  string
	}{
		{func(m *apiv1.Mutation) { m.CommitTs = 0 }, ReasonInvalidMutation, "m.commit_ts"},
		{func(m *apiv1.Mutation) { m.Kind = 0 }, ReasonInvalidMutation, "m.kind"},
		{func(m *apiv1.Mutation) { m.PrimaryKey = "" }, ReasonInvalidMutation, "m.primary_key"},
		{func(m *apiv1.Mutation) { m.PrimaryKey = "8" }, ReasonPrimaryKeyMismatch, "m.primary_key"},
		{func(m *apiv1.Mutation) { m.Fields["nope"] = v(int64(1)) }, ReasonUnknownField, "m.fields.nope"},
		{func(m *apiv1.Mutation) { m.Fields["title"] = v(int64(1)) }, ReasonTypeMismatch, "m.fields.title"},
		{func(m *apiv1.Mutation) { m.Fields["emb"] = v([]float32{1}) }, ReasonTypeMismatch, "m.fields.emb"},
		{func(m *apiv1.Mutation) { m.Fields["price"] = v("1.2.3") }, ReasonTypeMismatch, "m.fields.price"},
		{func(m *apiv1.Mutation) { m.Fields["id"] = v(nil) }, ReasonTypeMismatch, "m.fields.id"},
		{func(m *apiv1.Mutation) { delete(m.Fields, "id") }, ReasonInvalidMutation, "m.fields.id"},
		{func(m *apiv1.Mutation) { m.Fields["title"] = v("\xff") }, ReasonTypeMismatch, "m.fields.title"},
		{func(m *apiv1.Mutation) { m.PrimaryKey = "\xff" }, ReasonInvalidMutation, "m.primary_key"},
	}
	for i, c := range cases {
		m := ok()
		c.mut(m)
		wantErr(t, "E36 case "+string(rune('a'+i)), s.CheckMutation(m, "m"), c.reason, c.field)
	}
	// A delete's key must have the key's arity.
	s2 := NewSchema(mutate(baseDef(), func(d *apiv1.CollectionDefinition) {
		d.Fields[1].Role = apiv1.FieldRole_FIELD_ROLE_PRIMARY_KEY
		d.PrimaryKey = []string{"id", "title"}
	}))
	wantErr(t, "E36 delete arity", s2.CheckMutation(&apiv1.Mutation{CommitTs: 1, Kind: apiv1.MutationKind_MUTATION_KIND_DELETE, PrimaryKey: "1"}, "m"), ReasonInvalidMutation, "m.primary_key")
	if err := s2.CheckMutation(&apiv1.Mutation{CommitTs: 1, Kind: apiv1.MutationKind_MUTATION_KIND_DELETE, PrimaryKey: "1,a"}, "m"); err != nil {
		t.Fatal(err)
	}
	// Deletes need only the key; nulls are fine on non-key fields.
	if err := s.CheckMutation(&apiv1.Mutation{CommitTs: 1, Kind: apiv1.MutationKind_MUTATION_KIND_DELETE, PrimaryKey: "x"}, "m"); err != nil {
		t.Fatal(err)
	}
	m := ok()
	m.Fields["title"] = v(nil)
	if err := s.CheckMutation(m, "m"); err != nil {
		t.Fatal(err)
	}
}

// E36: CheckMutationAt (the per-row form Ingest uses: the path is rendered
// only on rejection, the single-component key compared without rendering)
// gives exactly CheckMutation's verdict and error with path "mutations[i]".
func TestCheckMutationAtMatchesCheckMutation(t *testing.T) {
	s := NewSchema(baseDef())
	muts := []*apiv1.Mutation{
		{CommitTs: 5, Kind: apiv1.MutationKind_MUTATION_KIND_UPSERT, PrimaryKey: "7", Fields: map[string]*apiv1.Value{"id": v(int64(7))}},
		{CommitTs: 5, Kind: apiv1.MutationKind_MUTATION_KIND_UPSERT, PrimaryKey: "-7", Fields: map[string]*apiv1.Value{"id": v(int64(-7))}},
		{CommitTs: 5, Kind: apiv1.MutationKind_MUTATION_KIND_UPSERT, PrimaryKey: "07", Fields: map[string]*apiv1.Value{"id": v(int64(7))}},
		{CommitTs: 5, Kind: apiv1.MutationKind_MUTATION_KIND_UPSERT, PrimaryKey: "7 ", Fields: map[string]*apiv1.Value{"id": v(int64(7))}},
		{CommitTs: 5, Kind: apiv1.MutationKind_MUTATION_KIND_UPSERT, PrimaryKey: "7", Fields: map[string]*apiv1.Value{"id": v("7")}},
		{CommitTs: 5, Kind: apiv1.MutationKind_MUTATION_KIND_UPSERT, PrimaryKey: "7", Fields: map[string]*apiv1.Value{"id": v(nil)}},
		{CommitTs: 5, Kind: apiv1.MutationKind_MUTATION_KIND_UPSERT, PrimaryKey: "7", Fields: map[string]*apiv1.Value{}},
		{CommitTs: 5, Kind: apiv1.MutationKind_MUTATION_KIND_UPSERT, PrimaryKey: "7", Fields: map[string]*apiv1.Value{"id": v(int64(7)), "nope": v(int64(1))}},
		{CommitTs: 5, Kind: apiv1.MutationKind_MUTATION_KIND_UPSERT, PrimaryKey: "7", Fields: map[string]*apiv1.Value{"id": v(int64(7)), "title": v("\xff")}},
		{CommitTs: 0, Kind: apiv1.MutationKind_MUTATION_KIND_UPSERT, PrimaryKey: "7", Fields: map[string]*apiv1.Value{"id": v(int64(7))}},
		{CommitTs: 5, Kind: apiv1.MutationKind_MUTATION_KIND_DELETE, PrimaryKey: "7"},
	}
	for i, m := range muts {
		want := s.CheckMutation(m, fmt.Sprintf("mutations[%d]", i))
		got := s.CheckMutationAt(m, i)
		if (want == nil) != (got == nil) || (want != nil && *want.(*Error) != *got.(*Error)) {
			t.Errorf("mutation %d: CheckMutationAt = %v, CheckMutation = %v", i, got, want)
		}
	}
	// Same for a string key and an unsigned key.
	for _, c := range []struct {
		typ apiv1.FieldType
		val *apiv1.Value
		pk  string
	}{
		{apiv1.FieldType_FIELD_TYPE_STRING, v("a,b"), "a,b"},
		{apiv1.FieldType_FIELD_TYPE_STRING, v("a"), "b"},
		{apiv1.FieldType_FIELD_TYPE_UINT, &apiv1.Value{Kind: &apiv1.Value_Uint64Value{Uint64Value: 18446744073709551615}}, "18446744073709551615"},
		{apiv1.FieldType_FIELD_TYPE_UINT, &apiv1.Value{Kind: &apiv1.Value_Uint64Value{Uint64Value: 1}}, "2"},
	} {
		s := NewSchema(mutate(baseDef(), func(d *apiv1.CollectionDefinition) { d.Fields[0].Type = c.typ }))
		m := &apiv1.Mutation{CommitTs: 5, Kind: apiv1.MutationKind_MUTATION_KIND_UPSERT, PrimaryKey: c.pk, Fields: map[string]*apiv1.Value{"id": c.val}}
		want, got := s.CheckMutation(m, "mutations[0]"), s.CheckMutationAt(m, 0)
		if (want == nil) != (got == nil) || (want != nil && *want.(*Error) != *got.(*Error)) {
			t.Errorf("%v key %q: CheckMutationAt = %v, CheckMutation = %v", c.typ, c.pk, got, want)
		}
	}
}

func TestValidDecimal(t *testing.T) {
	for _, s := range []string{"0", "-1", "+1.5", ".5", "1.", "1e10", "1.5E-3"} {
		if !validDecimal(s) {
			t.Errorf("%q rejected", s)
		}
	}
	for _, s := range []string{"", "-", ".", "1e", "1..2", "a", "1 "} {
		if validDecimal(s) {
			t.Errorf("%q accepted", s)
		}
	}
}

func FuzzCheckMutation(f *testing.F) {
	f.Add([]byte{})
	s := NewSchema(baseDef())
	f.Fuzz(func(t *testing.T, data []byte) {
		m := &apiv1.Mutation{}
		if proto.Unmarshal(data, m) != nil {
			return
		}
		_ = s.CheckMutation(m, "m") // must not panic
	})
}

// E90, E90a: error texts are valid UTF-8 even when they echo invalid input.
func TestErrorTextIsValidUTF8(t *testing.T) {
	e := Errf(ReasonCollectionNotFound, "name\xff", "x", "bad\xfe", "collection %s", "c\xff")
	for _, s := range []string{e.Field, e.Actual, e.Message, e.Error()} {
		if !utf8.ValidString(s) {
			t.Fatalf("invalid UTF-8: %q", s)
		}
	}
}
