package mysqlfront

import (
	"errors"
	"fmt"
	"strings"

	"github.com/searchfabric/sfemu/fakeupstream/sqlfront"
)

// Error is what an ERR packet carries: a MySQL error code, its SQLSTATE and
// the message (MY-E1).
type Error struct {
	Code    uint16
	State   string
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("ERROR %d (%s): %s", e.Code, e.State, e.Message) }

// MySQL error codes the front answers with.
const (
	ErUnknownCom        = 1047
	ErAccessDenied      = 1045
	ErDBCreateExists    = 1007
	ErBadDB             = 1049
	ErTableExists       = 1050
	ErBadField          = 1054
	ErDupFieldName      = 1060
	ErDupKeyName        = 1061
	ErDupEntry          = 1062
	ErParse             = 1064
	ErEmptyQuery        = 1065
	ErNoDB              = 1046
	ErUnknown           = 1105
	ErNoSuchTable       = 1146
	ErNetPacketTooLarge = 1153
	ErNetOutOfOrder     = 1156
	ErUnknownSystemVar  = 1193
	ErNotSupportedYet   = 1235
	ErUnsupportedPS     = 1295
	ErCantDropField     = 1091
	ErHandshake         = 1043
)

func newError(code uint16, state, format string, args ...any) *Error {
	return &Error{Code: code, State: state, Message: fmt.Sprintf(format, args...)}
}

func errUnsupported(format string, args ...any) *Error {
	return newError(ErNotSupportedYet, "42000", "sfemu mysqlfront: "+format, args...)
}

// toMySQLError maps an error of the SQL front (or of this package) to a
// MySQL error code and SQLSTATE (MY-E2). The message keeps the original text,
// so the place and the construct are not lost.
func toMySQLError(err error) *Error {
	var me *Error
	if errors.As(err, &me) {
		return me
	}
	msg := err.Error()
	var ue *sqlfront.UnsupportedError
	if errors.As(err, &ue) {
		return &Error{Code: ErNotSupportedYet, State: "42000", Message: msg}
	}
	low := strings.ToLower(msg)
	switch {
	case strings.Contains(low, "sqlfront: parse "):
		return &Error{Code: ErParse, State: "42000", Message: msg}
	case strings.Contains(low, "doesn't exist") && strings.Contains(low, "key column"):
		return &Error{Code: 1072, State: "42000", Message: msg}
	case strings.Contains(low, "sqlfront: table ") && (strings.Contains(low, "doesn't exist") || strings.Contains(low, "does not exist")):
		return &Error{Code: ErNoSuchTable, State: "42S02", Message: msg}
	case strings.Contains(low, "unknown database"), strings.Contains(low, "sqlfront: database") && strings.Contains(low, "does not exist"):
		return &Error{Code: ErBadDB, State: "42000", Message: msg}
	case strings.Contains(low, "no database selected"):
		return &Error{Code: ErNoDB, State: "3D000", Message: msg}
	case strings.Contains(low, "table") && strings.Contains(low, "already exists"):
		return &Error{Code: ErTableExists, State: "42S01", Message: msg}
	case strings.Contains(low, "sqlfront: database") && strings.Contains(low, "exists"):
		return &Error{Code: ErDBCreateExists, State: "HY000", Message: msg}
	case errors.Is(err, sqlfront.ErrDuplicateKey), strings.Contains(low, "duplicate entry"):
		return &Error{Code: ErDupEntry, State: "23000", Message: msg}
	case strings.Contains(low, "duplicate column name"):
		return &Error{Code: ErDupFieldName, State: "42S21", Message: msg}
	case strings.Contains(low, "duplicate key name"):
		return &Error{Code: ErDupKeyName, State: "42000", Message: msg}
	case strings.Contains(low, "can't drop"):
		return &Error{Code: ErCantDropField, State: "42000", Message: msg}
	case strings.Contains(low, "unknown column"):
		return &Error{Code: ErBadField, State: "42S22", Message: msg}
	}
	return &Error{Code: ErUnknown, State: "HY000", Message: msg}
}
