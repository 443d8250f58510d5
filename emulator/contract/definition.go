package contract

import (
	"fmt"
	"strings"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
)

// MaxNameLen bounds collection names (E3).
const MaxNameLen = 128

// ValidateCollectionName checks E3.
func ValidateCollectionName(name, field string) error {
	if name == "" || len(name) > MaxNameLen {
		return Errf(ReasonInvalidArgument, field, "1..128 bytes", fmt.Sprintf("%d bytes", len(name)), "collection name length")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return Errf(ReasonInvalidArgument, field, "[A-Za-z0-9_.-]", fmt.Sprintf("%q at offset %d", c, i), "collection name %q has a bad character", name)
		}
	}
	return nil
}

// stringCarried are the field types whose values travel as string_value.
func stringCarried(t apiv1.FieldType) bool {
	switch t {
	case apiv1.FieldType_FIELD_TYPE_STRING, apiv1.FieldType_FIELD_TYPE_DECIMAL, apiv1.FieldType_FIELD_TYPE_TIME,
		apiv1.FieldType_FIELD_TYPE_DURATION, apiv1.FieldType_FIELD_TYPE_ENUM, apiv1.FieldType_FIELD_TYPE_SET:
		return true
	}
	return false
}

// TextCapable reports whether a field of type t may have role TEXT (E11).
func TextCapable(t apiv1.FieldType) bool {
	return stringCarried(t) || t == apiv1.FieldType_FIELD_TYPE_JSON
}

// ValidateDefinition checks E3 and E11..E13. Errors name the field path
// under prefix (e.g. "definition").
func ValidateDefinition(def *apiv1.CollectionDefinition, prefix string) error {
	if def == nil {
		return Errf(ReasonInvalidDefinition, prefix, "a definition", "nil", "definition is required")
	}
	if err := ValidateCollectionName(def.GetName(), prefix+".name"); err != nil {
		ce := err.(*Error)
		ce.Reason = ReasonInvalidDefinition
		return ce
	}
	if len(def.GetFields()) == 0 {
		return Errf(ReasonInvalidDefinition, prefix+".fields", "at least one field", "none", "definition has no fields")
	}
	byName := make(map[string]*apiv1.Field, len(def.GetFields()))
	for i, f := range def.GetFields() {
		p := fmt.Sprintf("%s.fields[%d]", prefix, i)
		if f.GetName() == "" {
			return Errf(ReasonInvalidDefinition, p+".name", "non-empty", `""`, "field name is empty")
		}
		if _, dup := byName[f.GetName()]; dup {
			return Errf(ReasonInvalidDefinition, p+".name", "unique", f.GetName(), "duplicate field name")
		}
		byName[f.GetName()] = f
		if f.GetType() == apiv1.FieldType_FIELD_TYPE_UNSPECIFIED || apiv1.FieldType_name[int32(f.GetType())] == "" {
			return Errf(ReasonInvalidDefinition, p+".type", "a FieldType", f.GetType().String(), "field %q has no type", f.GetName())
		}
		if f.GetRole() == apiv1.FieldRole_FIELD_ROLE_UNSPECIFIED || apiv1.FieldRole_name[int32(f.GetRole())] == "" {
			return Errf(ReasonInvalidDefinition, p+".role", "a FieldRole", f.GetRole().String(), "field %q has no role", f.GetName())
		}
		isVec := f.GetType() == apiv1.FieldType_FIELD_TYPE_VECTOR
		switch {
		case f.GetRole() == apiv1.FieldRole_FIELD_ROLE_VECTOR && !isVec:
			return Errf(ReasonInvalidDefinition, p+".type", "FIELD_TYPE_VECTOR", f.GetType().String(), "VECTOR role needs a vector field")
		case isVec && f.GetVectorDim() == 0:
			return Errf(ReasonInvalidDefinition, p+".vector_dim", "> 0", "0", "vector field %q needs a dimension", f.GetName())
		case !isVec && f.GetVectorDim() != 0:
			return Errf(ReasonInvalidDefinition, p+".vector_dim", "0", fmt.Sprint(f.GetVectorDim()), "non-vector field %q has a dimension", f.GetName())
		case f.GetRole() == apiv1.FieldRole_FIELD_ROLE_TEXT && !TextCapable(f.GetType()):
			return Errf(ReasonInvalidDefinition, p+".type", "a string-carried type or JSON", f.GetType().String(), "TEXT role on a non-text field %q", f.GetName())
		}
		if apiv1.VectorMetric_name[int32(f.GetVectorMetric())] == "" {
			return Errf(ReasonInvalidDefinition, p+".vector_metric", "a VectorMetric", f.GetVectorMetric().String(), "unknown metric")
		}
	}
	if len(def.GetPrimaryKey()) == 0 {
		return Errf(ReasonInvalidDefinition, prefix+".primary_key", "at least one key field", "none", "collection needs a primary key")
	}
	listed := make(map[string]bool, len(def.GetPrimaryKey()))
	for i, name := range def.GetPrimaryKey() {
		p := fmt.Sprintf("%s.primary_key[%d]", prefix, i)
		f, ok := byName[name]
		if !ok {
			return Errf(ReasonInvalidDefinition, p, "a defined field", name, "primary-key field is not defined")
		}
		if listed[name] {
			return Errf(ReasonInvalidDefinition, p, "unique", name, "primary-key field listed twice")
		}
		listed[name] = true
		if f.GetRole() != apiv1.FieldRole_FIELD_ROLE_PRIMARY_KEY {
			return Errf(ReasonInvalidDefinition, p, "FIELD_ROLE_PRIMARY_KEY", f.GetRole().String(), "primary-key field %q has another role", name)
		}
		if t := f.GetType(); t == apiv1.FieldType_FIELD_TYPE_JSON || t == apiv1.FieldType_FIELD_TYPE_VECTOR {
			return Errf(ReasonInvalidDefinition, p, "a scalar type", t.String(), "primary-key field %q cannot be JSON or VECTOR", name)
		}
	}
	for i, f := range def.GetFields() {
		if f.GetRole() == apiv1.FieldRole_FIELD_ROLE_PRIMARY_KEY && !listed[f.GetName()] {
			return Errf(ReasonInvalidDefinition, fmt.Sprintf("%s.fields[%d].role", prefix, i), "listed in primary_key", "not listed", "PRIMARY_KEY field %q missing from primary_key", f.GetName())
		}
	}
	if len(def.GetSourcePartitions()) == 0 {
		return Errf(ReasonInvalidDefinition, prefix+".source_partitions", "at least one partition", "none", "collection needs a source partition")
	}
	seen := make(map[string]bool, len(def.GetSourcePartitions()))
	for i, sp := range def.GetSourcePartitions() {
		p := fmt.Sprintf("%s.source_partitions[%d]", prefix, i)
		if _, _, err := apiv1.ParsePartitionName(sp); err != nil {
			return Errf(ReasonInvalidDefinition, p, "table:<id> or keyspace:<id>/table:<id>", sp, "%v", err)
		}
		if seen[sp] {
			return Errf(ReasonInvalidDefinition, p, "unique", sp, "duplicate source partition")
		}
		seen[sp] = true
	}
	return nil
}

// Modalities returns the enabled modalities of a definition (E2, E11), in
// the order document, text, vector, metadata_aux.
func Modalities(def *apiv1.CollectionDefinition) []apiv1.Modality {
	out := []apiv1.Modality{apiv1.Modality_MODALITY_DOCUMENT}
	var text, vec bool
	for _, f := range def.GetFields() {
		switch f.GetRole() {
		case apiv1.FieldRole_FIELD_ROLE_TEXT:
			text = true
		case apiv1.FieldRole_FIELD_ROLE_VECTOR:
			vec = true
		}
	}
	if text {
		out = append(out, apiv1.Modality_MODALITY_TEXT)
	}
	if vec {
		out = append(out, apiv1.Modality_MODALITY_VECTOR)
	}
	if def.GetMetadataAux() {
		out = append(out, apiv1.Modality_MODALITY_METADATA_AUX)
	}
	return out
}

// ModalityName is the lower-case name used by schemafence and metrics.
func ModalityName(m apiv1.Modality) string {
	return strings.ToLower(strings.TrimPrefix(m.String(), "MODALITY_"))
}
