package normalize

import (
	"errors"

	"github.com/searchfabric/sfemu/reorder"
)

// ErrReorderOverflow marks the terminal overflow of a partition's reorder
// buffer (N13). Errors returned for it also match the runtime's sentinel
// (see overflowError).
var ErrReorderOverflow = errors.New("normalize: reorder buffer overflow")

// overflowError turns the reorder buffer's terminal error into the bridge's
// (N13), matching both ErrReorderOverflow sentinels.
func overflowError(err error) error {
	var oe *reorder.OverflowError
	if errors.As(err, &oe) {
		return &OverflowError{Err: oe}
	}
	return err
}

// OverflowError is the bridge's terminal reorder overflow (N13).
type OverflowError struct {
	Err *reorder.OverflowError
}

func (e *OverflowError) Error() string { return "normalize: " + e.Err.Error() }

// Unwrap exposes the reorder error and the sentinels.
func (e *OverflowError) Unwrap() []error {
	return append([]error{e.Err, ErrReorderOverflow}, runtimeOverflowSentinels...)
}

// runtimeOverflowSentinels are the runtime's sentinels the overflow error
// must also match (M14); set in callback.go.
var runtimeOverflowSentinels []error
