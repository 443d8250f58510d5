package ddlmap

import (
	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
	"github.com/searchfabric/sfemu/minicdc"
)

// ClassifyDiff returns the class a change from old to next requires (N27,
// the same rules as E27): REBUILD_FULL when the primary key changes (names,
// order or a key field's type); REBUILD_IN_PLACE when a field is removed, a
// field's type, role, dimension or metric changes, or a partition is
// removed; ADDITIVE otherwise. A nil old definition is the first generation
// (INITIAL_CREATION).
func ClassifyDiff(old, next *apiv1.CollectionDefinition) apiv1.SchemaUpdatePolicy {
	if old == nil {
		return apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_INITIAL_CREATION
	}
	oldF := map[string]*apiv1.Field{}
	for _, f := range old.GetFields() {
		oldF[f.GetName()] = f
	}
	newF := map[string]*apiv1.Field{}
	for _, f := range next.GetFields() {
		newF[f.GetName()] = f
	}
	// Primary key.
	opk, npk := old.GetPrimaryKey(), next.GetPrimaryKey()
	if len(opk) != len(npk) {
		return apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_FULL
	}
	for i := range opk {
		if opk[i] != npk[i] {
			return apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_FULL
		}
		if of, nf := oldF[opk[i]], newF[npk[i]]; of == nil || nf == nil || of.GetType() != nf.GetType() {
			return apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_FULL
		}
	}
	// Fields removed or changed.
	for name, of := range oldF {
		nf, ok := newF[name]
		if !ok || of.GetType() != nf.GetType() || of.GetRole() != nf.GetRole() ||
			of.GetVectorDim() != nf.GetVectorDim() || metric(of) != metric(nf) {
			return apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_IN_PLACE
		}
	}
	// Partitions removed.
	newP := map[string]bool{}
	for _, p := range next.GetSourcePartitions() {
		newP[p] = true
	}
	for _, p := range old.GetSourcePartitions() {
		if !newP[p] {
			return apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_IN_PLACE
		}
	}
	return apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_ADDITIVE
}

// metric folds UNSPECIFIED into COSINE (the proto's documented default).
func metric(f *apiv1.Field) apiv1.VectorMetric {
	if f.GetVectorMetric() == apiv1.VectorMetric_VECTOR_METRIC_UNSPECIFIED {
		return apiv1.VectorMetric_VECTOR_METRIC_COSINE
	}
	return f.GetVectorMetric()
}

// actionFloor is the least policy a DDL action demands regardless of the
// visible diff (N27): truncation empties the table, so stored documents
// must go. A truncated partition needs no floor: its old id leaves the
// definition, which is REBUILD_IN_PLACE and deletes exactly that
// partition's documents (E28, N34).
func actionFloor(action minicdc.DDLAction) apiv1.SchemaUpdatePolicy {
	switch action {
	case minicdc.ActionTruncateTable:
		return apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_FULL
	}
	return apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_UNSPECIFIED
}

// isDropAction reports DDLs that retire a whole table or database.
func isDropAction(action minicdc.DDLAction) bool { return action.IsDrop() }

// Classify is the full N27 decision for one DDL and collection. dropAll is
// set when the DDL retires the collection's table (drop table, drop
// database, or every partition dropped).
func Classify(action minicdc.DDLAction, dropAll bool, old, next *apiv1.CollectionDefinition) apiv1.SchemaUpdatePolicy {
	if old == nil {
		return apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_INITIAL_CREATION
	}
	if dropAll || isDropAction(action) {
		return apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_DROP
	}
	return contract.StrongerPolicy(ClassifyDiff(old, next), actionFloor(action))
}
