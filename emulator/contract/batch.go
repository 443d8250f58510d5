package contract

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
)

// Cursor is a partition's stream position: its current epoch and the last
// applied seq in that epoch.
type Cursor struct {
	Epoch   uint64
	LastSeq uint64
}

// Admission is the verdict of AdmitBatch.
type Admission int

const (
	// Apply: the batch is the next one in sequence; apply it.
	Apply Admission = iota + 1
	// Replay: the whole batch is at or below the last applied seq; no-op.
	Replay
)

// AdmitBatch checks the stream rules E33 and E34 of b against the
// partition's cursor. The caller checks mapping (E32) before and the
// generation token and mutations (E35, E36) after, for Apply only.
func AdmitBatch(cur Cursor, b *apiv1.MutationBatch) (Admission, error) {
	n := len(b.GetMutations())
	if n == 0 {
		return 0, Errf(ReasonInvalidBatch, "mutations", "at least one mutation", "0", "empty batch")
	}
	if b.GetFirstSeq() == 0 {
		return 0, Errf(ReasonInvalidBatch, "first_seq", ">= 1", "0", "seqs start at 1")
	}
	if b.GetFirstSeq() > math.MaxUint64-uint64(n) {
		return 0, Errf(ReasonInvalidBatch, "first_seq", "no overflow", fmt.Sprint(b.GetFirstSeq()), "seq range overflows")
	}
	for i, m := range b.GetMutations() {
		if want := b.GetFirstSeq() + uint64(i); m.GetSeq() != want {
			return 0, Errf(ReasonInvalidBatch, fmt.Sprintf("mutations[%d].seq", i), fmt.Sprint(want), fmt.Sprint(m.GetSeq()), "seqs in a batch must be first_seq, first_seq+1, ...")
		}
	}
	if b.GetSourceEpoch() == 0 {
		return 0, Errf(ReasonInvalidBatch, "source_epoch", ">= 1", "0", "epochs start at 1")
	}
	if b.GetSourceEpoch() < cur.Epoch {
		return 0, Errf(ReasonEpochRegression, "source_epoch", fmt.Sprintf(">= %d", cur.Epoch), fmt.Sprint(b.GetSourceEpoch()), "epoch went back for %s", b.GetSourcePartition())
	}
	last := cur.LastSeq
	if b.GetSourceEpoch() > cur.Epoch {
		last = 0
	}
	lastInBatch := b.GetFirstSeq() + uint64(n) - 1
	switch {
	case lastInBatch <= last:
		return Replay, nil
	case b.GetFirstSeq() <= last:
		return 0, Errf(ReasonSeqOverlap, "first_seq", fmt.Sprint(last+1), fmt.Sprint(b.GetFirstSeq()), "batch [%d,%d] overlaps applied seqs up to %d and is not an exact replay", b.GetFirstSeq(), lastInBatch, last)
	case b.GetFirstSeq() > last+1:
		return 0, Errf(ReasonSeqGap, "first_seq", fmt.Sprint(last+1), fmt.Sprint(b.GetFirstSeq()), "seqs %d..%d are missing", last+1, b.GetFirstSeq()-1)
	}
	return Apply, nil
}

// Schema is a definition compiled for fast per-mutation checks.
type Schema struct {
	Def    *apiv1.CollectionDefinition
	Fields map[string]*apiv1.Field
	PK     []*apiv1.Field
	// Layout lists the definition's fields in order: the layout the
	// emulator stores a canonical (fields map) row in (E45).
	Layout *Layout
}

// NewSchema compiles a validated definition.
func NewSchema(def *apiv1.CollectionDefinition) *Schema {
	names := make([]string, 0, len(def.GetFields()))
	for _, f := range def.GetFields() {
		names = append(names, f.GetName())
	}
	s := &Schema{Def: def, Fields: fieldMap(def), Layout: NewLayout(names)}
	for _, n := range def.GetPrimaryKey() {
		s.PK = append(s.PK, s.Fields[n])
	}
	return s
}

// CheckMutation checks E36 for one mutation; path prefixes field paths
// (e.g. "mutations[3]").
func (s *Schema) CheckMutation(m *apiv1.Mutation, path string) error {
	if done, err := s.checkHead(m, path); done || err != nil {
		return err
	}
	for name, v := range m.GetFields() {
		if err := s.checkField(s.Fields[name], name, v, path); err != nil {
			return err
		}
	}
	if len(s.PK) == 1 && singleKeyMatches(m.GetFields()[s.PK[0].GetName()], m.GetPrimaryKey()) {
		return nil // the common case, checked without rendering the key
	}
	return s.checkKey(m.GetPrimaryKey(), path, func(_ int, f *apiv1.Field) (*apiv1.Value, bool) {
		v, ok := m.GetFields()[f.GetName()]
		return v, ok
	})
}

// checkField checks one field value of an upsert (E36, E42); f is the
// definition's field of that name, nil when there is none.
func (s *Schema) checkField(f *apiv1.Field, name string, v *apiv1.Value, path string) error {
	if f == nil {
		return Errf(ReasonUnknownField, path+".fields."+name, "a field of "+s.Def.GetName(), name, "field is not in the definition")
	}
	// The path is built only on error: this runs per field of every row.
	if err := CheckValue(f, v, ""); err != nil {
		ce := err.(*Error)
		ce.Field = clean(path + ".fields." + name + ce.Field)
		return ce
	}
	return nil
}

// checkKey checks that pk is the canonical key of the key fields' values
// (get returns the value of the i-th key field, ok=false when absent).
func (s *Schema) checkKey(pk, path string, get func(i int, f *apiv1.Field) (*apiv1.Value, bool)) error {
	key, err := s.encodeKey(path, get)
	if err != nil {
		return err
	}
	if key != pk {
		return Errf(ReasonPrimaryKeyMismatch, path+".primary_key", strconv.Quote(key), strconv.Quote(pk), "primary key does not match the key fields")
	}
	return nil
}

// checkHead checks what does not depend on the fields' form: commit ts,
// key text, kind, and a delete's key (done=true: nothing more to check).
func (s *Schema) checkHead(m *apiv1.Mutation, path string) (done bool, err error) {
	if m.GetCommitTs() == 0 {
		return true, Errf(ReasonInvalidMutation, path+".commit_ts", "> 0", "0", "commit ts is required")
	}
	if m.GetPrimaryKey() == "" {
		return true, Errf(ReasonInvalidMutation, path+".primary_key", "non-empty", `""`, "primary key is required")
	}
	if !utf8.ValidString(m.GetPrimaryKey()) {
		return true, Errf(ReasonInvalidMutation, path+".primary_key", "valid UTF-8", strconv.Quote(m.GetPrimaryKey()), "primary key is not valid UTF-8")
	}
	switch m.GetKind() {
	case apiv1.MutationKind_MUTATION_KIND_DELETE:
		if _, err := apiv1.SplitKey(m.GetPrimaryKey(), len(s.PK)); err != nil {
			return true, Errf(ReasonInvalidMutation, path+".primary_key", fmt.Sprintf("a canonical key of %d components", len(s.PK)), strconv.Quote(m.GetPrimaryKey()), "%v", err)
		}
		return true, nil
	case apiv1.MutationKind_MUTATION_KIND_UPSERT:
	default:
		return true, Errf(ReasonInvalidMutation, path+".kind", "UPSERT or DELETE", m.GetKind().String(), "unknown mutation kind")
	}
	return false, nil
}

// CheckMutationAt is CheckMutation of mutations[i] of a batch. The path is
// rendered only when the mutation is rejected: this runs for every row.
func (s *Schema) CheckMutationAt(m *apiv1.Mutation, i int) error {
	err := s.CheckMutation(m, "")
	if ce, ok := err.(*Error); ok {
		// Every field path CheckMutation builds is path + suffix.
		ce.Field = "mutations[" + strconv.Itoa(i) + "]" + ce.Field
	}
	return err
}

// singleKeyMatches reports whether v, rendered as the only key component
// (KeyComponent), equals pk, without allocating for the usual kinds. false
// means "not shown equal": the caller renders the key and reports.
func singleKeyMatches(v *apiv1.Value, pk string) bool {
	var buf [24]byte
	switch k := v.GetKind().(type) {
	case *apiv1.Value_Int64Value:
		return string(strconv.AppendInt(buf[:0], k.Int64Value, 10)) == pk
	case *apiv1.Value_Uint64Value:
		return string(strconv.AppendUint(buf[:0], k.Uint64Value, 10)) == pk
	case *apiv1.Value_StringValue:
		return k.StringValue == pk
	}
	return false
}

func (s *Schema) encodeKey(path string, get func(i int, f *apiv1.Field) (*apiv1.Value, bool)) (string, error) {
	comps := make([]string, len(s.PK))
	for i, f := range s.PK {
		v, ok := get(i, f)
		if !ok {
			return "", Errf(ReasonInvalidMutation, path+".fields."+f.GetName(), "the primary-key value", "absent", "upsert must carry every key field")
		}
		c, err := apiv1.KeyComponent(v)
		if err != nil {
			return "", Errf(ReasonInvalidMutation, path+".fields."+f.GetName(), "a non-null key value", kindName(v), "%v", err)
		}
		comps[i] = c
	}
	return apiv1.JoinKey(comps), nil
}

func kindName(v *apiv1.Value) string {
	switch v.GetKind().(type) {
	case nil:
		return "unset"
	case *apiv1.Value_NullValue:
		return "null_value"
	case *apiv1.Value_Int64Value:
		return "int64_value"
	case *apiv1.Value_Uint64Value:
		return "uint64_value"
	case *apiv1.Value_DoubleValue:
		return "double_value"
	case *apiv1.Value_StringValue:
		return "string_value"
	case *apiv1.Value_BytesValue:
		return "bytes_value"
	case *apiv1.Value_BoolValue:
		return "bool_value"
	case *apiv1.Value_JsonValue:
		return "json_value"
	case *apiv1.Value_VectorValue:
		return "vector_value"
	}
	return "unknown"
}

// KindFor is the one Value kind a field type accepts besides null (E42).
func KindFor(t apiv1.FieldType) string {
	switch {
	case stringCarried(t):
		return "string_value"
	}
	switch t {
	case apiv1.FieldType_FIELD_TYPE_INT:
		return "int64_value"
	case apiv1.FieldType_FIELD_TYPE_UINT, apiv1.FieldType_FIELD_TYPE_BIT:
		return "uint64_value"
	case apiv1.FieldType_FIELD_TYPE_FLOAT:
		return "double_value"
	case apiv1.FieldType_FIELD_TYPE_BOOL:
		return "bool_value"
	case apiv1.FieldType_FIELD_TYPE_JSON:
		return "json_value"
	case apiv1.FieldType_FIELD_TYPE_BYTES:
		return "bytes_value"
	case apiv1.FieldType_FIELD_TYPE_VECTOR:
		return "vector_value"
	}
	return "none"
}

// CheckValue checks that v fits field f (E42). Null is allowed here; key
// fields are checked for null by the key encoding.
func CheckValue(f *apiv1.Field, v *apiv1.Value, path string) error {
	k := kindName(v)
	if k == "null_value" {
		if f.GetRole() == apiv1.FieldRole_FIELD_ROLE_PRIMARY_KEY {
			return Errf(ReasonTypeMismatch, path, KindFor(f.GetType()), k, "primary-key field cannot be null")
		}
		return nil
	}
	want := KindFor(f.GetType())
	if k != want {
		return Errf(ReasonTypeMismatch, path, want, k, "field %q has type %s", f.GetName(), f.GetType())
	}
	// Strings travel in protobuf and JSON: they must be valid UTF-8.
	if (k == "string_value" && !utf8.ValidString(v.GetStringValue())) || (k == "json_value" && !utf8.ValidString(v.GetJsonValue())) {
		return Errf(ReasonTypeMismatch, path, "valid UTF-8", "invalid UTF-8", "field %q holds bytes that are not UTF-8 text (use BYTES)", f.GetName())
	}
	switch f.GetType() {
	case apiv1.FieldType_FIELD_TYPE_JSON:
		if !json.Valid([]byte(v.GetJsonValue())) {
			return Errf(ReasonTypeMismatch, path, "valid JSON text", truncate(v.GetJsonValue()), "invalid JSON")
		}
	case apiv1.FieldType_FIELD_TYPE_DECIMAL:
		if !validDecimal(v.GetStringValue()) {
			return Errf(ReasonTypeMismatch, path, "a decimal literal", truncate(v.GetStringValue()), "invalid decimal")
		}
	case apiv1.FieldType_FIELD_TYPE_VECTOR:
		vals := v.GetVectorValue().GetValues()
		if uint32(len(vals)) != f.GetVectorDim() {
			return Errf(ReasonTypeMismatch, path, fmt.Sprintf("%d dimensions", f.GetVectorDim()), fmt.Sprintf("%d dimensions", len(vals)), "vector has the wrong dimension")
		}
		for i, x := range vals {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return Errf(ReasonTypeMismatch, fmt.Sprintf("%s[%d]", path, i), "a finite number", fmt.Sprint(x), "vector element is not finite")
			}
		}
	case apiv1.FieldType_FIELD_TYPE_FLOAT:
		if d := v.GetDoubleValue(); math.IsNaN(d) {
			return Errf(ReasonTypeMismatch, path, "a number", "NaN", "NaN is not a storable float")
		}
	}
	return nil
}

// validDecimal accepts [+-]digits[.digits][e[+-]digits] with at least one digit.
func validDecimal(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i, digits = i+1, digits+1
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i, digits = i+1, digits+1
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		ed := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i, ed = i+1, ed+1
		}
		if ed == 0 {
			return false
		}
	}
	return i == len(s)
}

func truncate(s string) string {
	if len(s) > 64 {
		return strconv.Quote(s[:64]) + "..."
	}
	return strconv.Quote(s)
}
