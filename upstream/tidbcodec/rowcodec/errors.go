package rowcodec

import (
	"errors"
	"fmt"
)

// Format is a row value layout.
type Format uint8

const (
	// FormatUnknown is the zero value: no row parsed yet.
	FormatUnknown Format = iota
	// FormatV1 is the old layout: datum-encoded (column id, value) pairs.
	FormatV1
	// FormatV2 is row format v2, the layout TiDB writes since 4.0.
	FormatV2
	// FormatKeyDatum is a key-form datum (a column of a common handle);
	// only used with DecodeCell and in errors.
	FormatKeyDatum
)

func (f Format) String() string {
	switch f {
	case FormatV1:
		return "row v1"
	case FormatV2:
		return "row v2"
	case FormatKeyDatum:
		return "key datum"
	default:
		return "row format unknown"
	}
}

// NoColumn is the ColumnID of a DecodeError that is not about one column
// (header and layout errors).
const NoColumn int64 = -1 << 63

// DecodeError reports bad row bytes: what was wrong and where. Offset is the
// byte offset in the row value where the bad part starts.
type DecodeError struct {
	Format   Format
	ColumnID int64 // NoColumn when the error is not about one column
	Offset   int
	Reason   string
}

func (e *DecodeError) Error() string {
	if e.ColumnID == NoColumn {
		return fmt.Sprintf("rowcodec: %s: at offset %d: %s", e.Format, e.Offset, e.Reason)
	}
	return fmt.Sprintf("rowcodec: %s: column %d at offset %d: %s", e.Format, e.ColumnID, e.Offset, e.Reason)
}

// ErrBadRow matches every *DecodeError through errors.Is.
var ErrBadRow = errors.New("rowcodec: bad row value")

// Is makes errors.Is(err, ErrBadRow) true for decode errors.
func (e *DecodeError) Is(target error) bool { return target == ErrBadRow }

func headerErr(f Format, off int, format string, args ...any) error {
	return &DecodeError{Format: f, ColumnID: NoColumn, Offset: off, Reason: fmt.Sprintf(format, args...)}
}

func colErr(f Format, id int64, off int, format string, args ...any) error {
	return &DecodeError{Format: f, ColumnID: id, Offset: off, Reason: fmt.Sprintf(format, args...)}
}
