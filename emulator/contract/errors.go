// Package contract holds the pure rules of the emulator contract
// (specs/emulator-contract.md): the typed error every rejection is, and the
// validation of requests, definitions, schema changes, batches and values.
// It does no I/O and keeps no state; the emulator core calls it with the
// current state and applies what it admits.
package contract

import (
	"errors"
	"fmt"
	"strings"
)

// Reason is a stable, machine-readable rejection code (E90).
type Reason string

// Reasons, one per rule family. The gRPC and HTTP layers map them to status
// codes (see the table in specs/emulator-contract.md).
const (
	ReasonInvalidMeta         Reason = "INVALID_META"
	ReasonInvalidDefinition   Reason = "INVALID_DEFINITION"
	ReasonUnspecifiedPolicy   Reason = "UNSPECIFIED_POLICY"
	ReasonInvalidZeroState    Reason = "INVALID_ZERO_STATE"
	ReasonInvalidBatch        Reason = "INVALID_BATCH"
	ReasonInvalidMutation     Reason = "INVALID_MUTATION"
	ReasonUnknownField        Reason = "UNKNOWN_FIELD"
	ReasonTypeMismatch        Reason = "TYPE_MISMATCH"
	ReasonPrimaryKeyMismatch  Reason = "PRIMARY_KEY_MISMATCH"
	ReasonInvalidQuery        Reason = "INVALID_QUERY"
	ReasonInvalidArgument     Reason = "INVALID_ARGUMENT"
	ReasonCollectionNotFound  Reason = "COLLECTION_NOT_FOUND"
	ReasonAlreadyExists       Reason = "ALREADY_EXISTS"
	ReasonIdempotencyConflict Reason = "IDEMPOTENCY_CONFLICT"
	ReasonPartitionConflict   Reason = "PARTITION_CONFLICT"
	ReasonFenceMismatch       Reason = "FENCE_MISMATCH"
	ReasonNonMonotonicSchema  Reason = "NON_MONOTONIC_SCHEMA"
	ReasonPolicyTooWeak       Reason = "POLICY_TOO_WEAK"
	ReasonPartitionNotMapped  Reason = "PARTITION_NOT_MAPPED"
	ReasonEpochRegression     Reason = "EPOCH_REGRESSION"
	ReasonSeqGap              Reason = "SEQ_GAP"
	ReasonSeqOverlap          Reason = "SEQ_OVERLAP"
	ReasonStaleGeneration     Reason = "STALE_GENERATION"
	ReasonProgressRegression  Reason = "PROGRESS_REGRESSION"
	ReasonLateMutation        Reason = "LATE_MUTATION"
	ReasonNotYetFresh         Reason = "NOT_YET_FRESH"
	ReasonClosed              Reason = "CLOSED"
	ReasonInternal            Reason = "INTERNAL"
)

// Error is every rejection the contract returns: what rule family was
// broken (Reason), where (Field, a protobuf field path), and the expected vs
// actual value when there is one.
type Error struct {
	Reason   Reason
	Field    string
	Expected string
	Actual   string
	Message  string
}

func (e *Error) Error() string {
	s := "emulator: " + string(e.Reason)
	if e.Field != "" {
		s += " at " + e.Field
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Expected != "" || e.Actual != "" {
		s += fmt.Sprintf(" (expected %s, actual %s)", quoteEmpty(e.Expected), quoteEmpty(e.Actual))
	}
	return s
}

func quoteEmpty(s string) string {
	if s == "" {
		return `""`
	}
	return s
}

// Errf builds an *Error. Every text is made valid UTF-8 (invalid bytes
// become U+FFFD) because it travels in protobuf strings and JSON bodies and
// often echoes client input.
func Errf(reason Reason, field, expected, actual, format string, args ...any) *Error {
	return &Error{
		Reason:   reason,
		Field:    clean(field),
		Expected: clean(expected),
		Actual:   clean(actual),
		Message:  clean(fmt.Sprintf(format, args...)),
	}
}

func clean(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// ReasonOf returns the Reason of a contract error anywhere in err's chain,
// or "" when err is not one.
func ReasonOf(err error) Reason {
	var ce *Error
	if errors.As(err, &ce) {
		return ce.Reason
	}
	return ""
}
