package contract

import (
	"fmt"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
)

// MaxIdempotencyKeyLen bounds meta.idempotency_key (E20).
const MaxIdempotencyKeyLen = 256

// ValidateMeta checks E20.
func ValidateMeta(m *apiv1.RequestMeta) error {
	switch {
	case m == nil:
		return Errf(ReasonInvalidMeta, "meta", "request metadata", "nil", "meta is required")
	case m.GetIdempotencyKey() == "":
		return Errf(ReasonInvalidMeta, "meta.idempotency_key", "non-empty", `""`, "idempotency key is required")
	case len(m.GetIdempotencyKey()) > MaxIdempotencyKeyLen:
		return Errf(ReasonInvalidMeta, "meta.idempotency_key", fmt.Sprintf("<= %d bytes", MaxIdempotencyKeyLen), fmt.Sprintf("%d bytes", len(m.GetIdempotencyKey())), "idempotency key too long")
	case m.GetClientId() == "":
		return Errf(ReasonInvalidMeta, "meta.client_id", "non-empty", `""`, "client id is required")
	case m.GetClientKind() == apiv1.ClientKind_CLIENT_KIND_UNSPECIFIED || apiv1.ClientKind_name[int32(m.GetClientKind())] == "":
		return Errf(ReasonInvalidMeta, "meta.client_kind", "an explicit ClientKind", m.GetClientKind().String(), "client kind must be explicit")
	}
	return nil
}

// Current is the lineage state of one collection name as the emulator holds
// it. Lineage is nil when the name was never created; Active is false when
// it was never created or was dropped.
type Current struct {
	Active     bool
	Lineage    *apiv1.Lineage
	Definition *apiv1.CollectionDefinition
}

// PolicyRank orders the schema-change classes by strength (E27):
// ADDITIVE < REBUILD_IN_PLACE < REBUILD_FULL. The other policies
// (UNSPECIFIED, INITIAL_CREATION, DROP) are not on the scale and rank 0.
// The emulator checks a request against it and the normalize bridge picks
// its policy with it, so the two sides cannot disagree on the order.
func PolicyRank(p apiv1.SchemaUpdatePolicy) int {
	switch p {
	case apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_ADDITIVE:
		return 1
	case apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_IN_PLACE:
		return 2
	case apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_FULL:
		return 3
	}
	return 0
}

// StrongerPolicy returns the stronger of a and b by PolicyRank (a on a
// tie).
func StrongerPolicy(a, b apiv1.SchemaUpdatePolicy) apiv1.SchemaUpdatePolicy {
	if PolicyRank(b) > PolicyRank(a) {
		return b
	}
	return a
}

// CheckSchemaRequest checks E20, E21, E23..E25, E27 and E31 for req against
// the current state of its collection name. Idempotency (E22) and partition
// conflicts (E13) need the emulator's other state and are checked there.
func CheckSchemaRequest(cur Current, req *apiv1.PutCollectionSchemaRequest) error {
	if err := ValidateMeta(req.GetMeta()); err != nil {
		return err
	}
	name := req.GetScope().GetCollection()
	if err := ValidateCollectionName(name, "scope.collection"); err != nil {
		return err
	}
	if req.GetScope().GetDdlCommitTs() == 0 {
		return Errf(ReasonInvalidArgument, "scope.ddl_commit_ts", "> 0", "0", "DDL commit ts is required")
	}
	policy := req.GetUpdatePolicy()
	if policy == apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_UNSPECIFIED {
		return Errf(ReasonUnspecifiedPolicy, "update_policy", "an explicit policy", policy.String(), "update policy must be explicit")
	}
	if apiv1.SchemaUpdatePolicy_name[int32(policy)] == "" {
		return Errf(ReasonInvalidArgument, "update_policy", "a SchemaUpdatePolicy", policy.String(), "unknown policy")
	}
	isDrop := policy == apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_DROP
	if !isDrop {
		if err := ValidateDefinition(req.GetDefinition(), "definition"); err != nil {
			return err
		}
		if req.GetDefinition().GetName() != name {
			return Errf(ReasonInvalidDefinition, "definition.name", name, req.GetDefinition().GetName(), "definition name must equal scope.collection")
		}
	} else if req.GetDefinition() != nil && req.GetDefinition().GetName() != "" && req.GetDefinition().GetName() != name {
		return Errf(ReasonInvalidDefinition, "definition.name", name, req.GetDefinition().GetName(), "definition name must equal scope.collection")
	}
	fence := req.GetFence()
	if !cur.Active {
		if policy != apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_INITIAL_CREATION {
			return Errf(ReasonCollectionNotFound, "scope.collection", "an active collection", name, "collection %q does not exist; only INITIAL_CREATION can create it", name)
		}
		switch {
		case req.GetSchemaVersion() != 1:
			return Errf(ReasonInvalidZeroState, "schema_version", "1", fmt.Sprint(req.GetSchemaVersion()), "first generation must use the zero-state tuple")
		case fence.GetExpectedPrevSchemaVersion() != 0:
			return Errf(ReasonInvalidZeroState, "fence.expected_prev_schema_version", "0", fmt.Sprint(fence.GetExpectedPrevSchemaVersion()), "first generation must use the zero-state tuple")
		case fence.GetSchemaGenerationToken() != apiv1.InitialGenerationToken:
			return Errf(ReasonInvalidZeroState, "fence.schema_generation_token", apiv1.InitialGenerationToken, fence.GetSchemaGenerationToken(), "first generation must use the zero-state tuple")
		case !fence.GetEnforceMonotonicApply():
			return Errf(ReasonInvalidZeroState, "fence.enforce_monotonic_apply", "true", "false", "first generation must use the zero-state tuple")
		}
		return nil
	}
	lin := cur.Lineage
	if policy == apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_INITIAL_CREATION {
		return Errf(ReasonAlreadyExists, "scope.collection", "a name without an active collection", name, "collection %q already exists (generation %s)", name, lin.GetSchemaGenerationToken())
	}
	if fence.GetExpectedPrevSchemaVersion() != lin.GetSchemaVersion() {
		return Errf(ReasonFenceMismatch, "fence.expected_prev_schema_version", fmt.Sprint(lin.GetSchemaVersion()), fmt.Sprint(fence.GetExpectedPrevSchemaVersion()), "fence does not match the current lineage")
	}
	if fence.GetSchemaGenerationToken() != lin.GetSchemaGenerationToken() {
		return Errf(ReasonFenceMismatch, "fence.schema_generation_token", lin.GetSchemaGenerationToken(), fence.GetSchemaGenerationToken(), "fence does not match the current lineage")
	}
	if fence.GetEnforceMonotonicApply() {
		if req.GetSchemaVersion() <= lin.GetSchemaVersion() {
			return Errf(ReasonNonMonotonicSchema, "schema_version", fmt.Sprintf("> %d", lin.GetSchemaVersion()), fmt.Sprint(req.GetSchemaVersion()), "schema version must grow")
		}
		if req.GetScope().GetDdlCommitTs() < lin.GetLastDdlCommitTs() {
			return Errf(ReasonNonMonotonicSchema, "scope.ddl_commit_ts", fmt.Sprintf(">= %d", lin.GetLastDdlCommitTs()), fmt.Sprint(req.GetScope().GetDdlCommitTs()), "DDL commit ts went back")
		}
	}
	if isDrop {
		return nil
	}
	required := RequiredPolicy(cur.Definition, req.GetDefinition())
	if PolicyRank(policy) < PolicyRank(required) {
		return Errf(ReasonPolicyTooWeak, "update_policy", required.String(), policy.String(), "the schema diff needs at least %s", required)
	}
	return nil
}

// RequiredPolicy classifies the change from old to new (E27).
func RequiredPolicy(old, new *apiv1.CollectionDefinition) apiv1.SchemaUpdatePolicy {
	oldF := fieldMap(old)
	newF := fieldMap(new)
	// Primary key: names, order and key field types.
	if len(old.GetPrimaryKey()) != len(new.GetPrimaryKey()) {
		return apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_FULL
	}
	for i, n := range old.GetPrimaryKey() {
		if new.GetPrimaryKey()[i] != n || oldF[n].GetType() != newF[n].GetType() {
			return apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_FULL
		}
	}
	for name, of := range oldF {
		nf, ok := newF[name]
		if !ok || nf.GetType() != of.GetType() || nf.GetRole() != of.GetRole() ||
			nf.GetVectorDim() != of.GetVectorDim() || nf.GetVectorMetric() != of.GetVectorMetric() {
			return apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_IN_PLACE
		}
	}
	newP := make(map[string]bool, len(new.GetSourcePartitions()))
	for _, p := range new.GetSourcePartitions() {
		newP[p] = true
	}
	for _, p := range old.GetSourcePartitions() {
		if !newP[p] {
			return apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_IN_PLACE
		}
	}
	return apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_ADDITIVE
}

func fieldMap(def *apiv1.CollectionDefinition) map[string]*apiv1.Field {
	m := make(map[string]*apiv1.Field, len(def.GetFields()))
	for _, f := range def.GetFields() {
		m[f.GetName()] = f
	}
	return m
}
