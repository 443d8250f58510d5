package rowcodec

import (
	"fmt"
	"math"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/types"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// class is how a column's stored bytes are turned into a datum; computed once
// per column so the per-cell path is one switch.
type class uint8

const (
	clsInvalid class = iota
	clsSigned
	clsUnsigned
	clsYear
	clsFloat32
	clsFloat64
	clsString
	clsBytes
	clsDecimal
	clsTime
	clsDuration
	clsEnum
	clsSet
	clsBit
	clsJSON
	clsVector
)

// Column is what the decoder needs to know about one column: its id and the
// parts of its FieldType that shape the value. Build it once per schema
// version with NewColumn; it is immutable afterwards and safe to share.
type Column struct {
	ID int64
	// Tp is the MySQL type byte (mysql.Type*).
	Tp byte

	cls      class
	min, max int64  // signed range of clsSigned / clsYear
	umax     uint64 // unsigned range of clsUnsigned
	fsp      uint8  // time / duration
	bitWidth uint8  // BIT: bytes of the value, (flen+7)/8
	bitLen   uint8  // BIT: declared bits (1..64)
	decPrec  byte   // DECIMAL: declared shape and its bin size, the common cell shape
	decFrac  byte
	decSize  int
	elems    []string
	setNames []string // SET with few members: names for every bitmask
	invalid  string   // why the column type cannot be decoded
}

// maxPrecomputedSetMembers bounds the per-column table of SET names (2^n
// strings) built so that decoding a SET does not allocate.
const maxPrecomputedSetMembers = 8

// NewColumn derives the decoding shape of column id from its FieldType. A
// type this package cannot decode is not an error here: decoding a value of
// that column reports it, so tables with such columns stay usable as long
// as the column is not read.
func NewColumn(id int64, ft *types.FieldType) Column {
	c := Column{ID: id, Tp: ft.GetType()}
	unsigned := mysql.HasUnsignedFlag(ft.GetFlag())
	switch c.Tp {
	case mysql.TypeTiny:
		c.setInt(unsigned, math.MinInt8, math.MaxInt8, math.MaxUint8)
	case mysql.TypeShort:
		c.setInt(unsigned, math.MinInt16, math.MaxInt16, math.MaxUint16)
	case mysql.TypeInt24:
		c.setInt(unsigned, -1<<23, 1<<23-1, 1<<24-1)
	case mysql.TypeLong:
		c.setInt(unsigned, math.MinInt32, math.MaxInt32, math.MaxUint32)
	case mysql.TypeLonglong:
		c.setInt(unsigned, math.MinInt64, math.MaxInt64, math.MaxUint64)
	case mysql.TypeYear:
		// YEAR is 0 (the zero year) or 1901..2155; TiDB stores it as an int.
		c.cls, c.min, c.max = clsYear, 0, 2155
	case mysql.TypeFloat:
		c.cls = clsFloat32
	case mysql.TypeDouble:
		c.cls = clsFloat64
	case mysql.TypeVarchar, mysql.TypeString, mysql.TypeVarString,
		mysql.TypeBlob, mysql.TypeTinyBlob, mysql.TypeMediumBlob, mysql.TypeLongBlob:
		if ft.GetCharset() == "binary" {
			c.cls = clsBytes
		} else {
			c.cls = clsString
		}
	case mysql.TypeNewDecimal:
		c.cls = clsDecimal
		if size, err := value.DecimalBinSize(ft.GetFlen(), ft.GetDecimal()); err == nil {
			c.decPrec, c.decFrac, c.decSize = byte(ft.GetFlen()), byte(ft.GetDecimal()), size
		}
	case mysql.TypeDate, mysql.TypeDatetime, mysql.TypeTimestamp:
		c.cls = clsTime
		if c.Tp != mysql.TypeDate {
			c.fsp = clampFsp(ft.GetDecimal())
		}
	case mysql.TypeDuration:
		c.cls = clsDuration
		c.fsp = clampFsp(ft.GetDecimal())
	case mysql.TypeEnum:
		c.cls = clsEnum
		c.elems = ft.GetElems()
	case mysql.TypeSet:
		c.cls = clsSet
		c.elems = ft.GetElems()
		if len(c.elems) > 64 {
			c.cls, c.invalid = clsInvalid, fmt.Sprintf("SET with %d members (at most 64)", len(c.elems))
		} else if len(c.elems) <= maxPrecomputedSetMembers {
			c.setNames = make([]string, 1<<len(c.elems))
			for bits := range c.setNames {
				c.setNames[bits] = joinSet(c.elems, uint64(bits))
			}
		}
	case mysql.TypeBit:
		c.cls = clsBit
		flen := ft.GetFlen()
		if flen <= 0 {
			flen = 1 // BIT without a length is BIT(1)
		}
		if flen > 64 {
			c.cls, c.invalid = clsInvalid, fmt.Sprintf("BIT(%d) wider than 64 bits", flen)
		} else {
			c.bitLen = uint8(flen)
			c.bitWidth = uint8((flen + 7) / 8)
		}
	case mysql.TypeJSON:
		c.cls = clsJSON
	case mysql.TypeTiDBVectorFloat32:
		c.cls = clsVector
	default:
		c.invalid = fmt.Sprintf("column type %d (%s) is not supported", c.Tp, types.TypeToStr(c.Tp, ft.GetCharset()))
	}
	return c
}

func (c *Column) setInt(unsigned bool, lo, hi int64, uhi uint64) {
	if unsigned {
		c.cls, c.umax = clsUnsigned, uhi
	} else {
		c.cls, c.min, c.max = clsSigned, lo, hi
	}
}

func clampFsp(d int) uint8 {
	if d < 0 {
		return 0
	}
	if d > 6 {
		return 6
	}
	return uint8(d)
}

// joinSet renders the members of a SET bitmask, comma-separated in member
// order, as MySQL prints them.
func joinSet(elems []string, bits uint64) string {
	var sb strings.Builder
	for i, e := range elems {
		if bits&(1<<uint(i)) != 0 {
			if sb.Len() > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(e)
		}
	}
	return sb.String()
}

// Unsigned reports whether the column holds unsigned integers.
func (c *Column) Unsigned() bool { return c.cls == clsUnsigned }

// Supported reports whether values of this column can be decoded, and if
// not, why.
func (c *Column) Supported() (bool, string) { return c.cls != clsInvalid, c.invalid }

// IsString reports whether the column holds text (non-binary charset).
func (c *Column) IsString() bool { return c.cls == clsString }

// IsBytes reports whether the column holds binary strings.
func (c *Column) IsBytes() bool { return c.cls == clsBytes }
