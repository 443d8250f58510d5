package mounter

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/mysql"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// originDefault computes the value a row gets for a column it does not
// store (spec rules MT10-MT12): the column's origin default (the default in
// force when the column was added, which is what every older row implicitly
// holds), else NULL for a nullable column, else the type's zero value. The
// datum owns its bytes. An unusable default is an error reported when the
// column is read, not when the schema is loaded.
func originDefault(ci *model.ColumnInfo) (value.Datum, error) {
	ft := &ci.FieldType
	tp := ft.GetType()
	raw := ci.OriginDefaultValue
	if tp == mysql.TypeBit && ci.OriginDefaultBit != nil {
		v, err := value.BitValue(ci.OriginDefaultBit)
		if err != nil {
			return value.Datum{}, err
		}
		return value.NewBitDatum(v, bitWidth(ft.GetFlen())), nil
	}
	if raw == nil {
		if !mysql.HasNotNullFlag(ft.GetFlag()) {
			return value.Datum{}, nil
		}
		return zeroValue(ci)
	}
	var s string
	switch x := raw.(type) {
	case string:
		s = x
	case float64:
		s = strconv.FormatFloat(x, 'f', -1, 64)
	case json.Number:
		s = x.String()
	case bool:
		s = "0"
		if x {
			s = "1"
		}
	default:
		return value.Datum{}, fmt.Errorf("origin default %v of Go type %T is not a scalar", raw, raw)
	}
	return parseDefault(ci, s)
}

func bitWidth(flen int) int {
	if flen <= 0 {
		flen = 1
	}
	return (flen + 7) / 8
}

func parseDefault(ci *model.ColumnInfo, s string) (value.Datum, error) {
	ft := &ci.FieldType
	tp := ft.GetType()
	unsigned := mysql.HasUnsignedFlag(ft.GetFlag())
	switch tp {
	case mysql.TypeTiny, mysql.TypeShort, mysql.TypeInt24, mysql.TypeLong, mysql.TypeLonglong:
		if unsigned {
			u, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
			if err != nil {
				return value.Datum{}, fmt.Errorf("origin default %q: %v", s, err)
			}
			return value.NewUintDatum(u), nil
		}
		i, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return value.Datum{}, fmt.Errorf("origin default %q: %v", s, err)
		}
		return value.NewIntDatum(i), nil
	case mysql.TypeYear:
		i, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return value.Datum{}, fmt.Errorf("origin default %q: %v", s, err)
		}
		return value.NewYearDatum(i), nil
	case mysql.TypeFloat, mysql.TypeDouble:
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return value.Datum{}, fmt.Errorf("origin default %q: %v", s, err)
		}
		if tp == mysql.TypeFloat {
			if math.Abs(f) > math.MaxFloat32 {
				return value.Datum{}, fmt.Errorf("origin default %q out of FLOAT range", s)
			}
			return value.NewFloat32Datum(float32(f)), nil
		}
		return value.NewFloat64Datum(f), nil
	case mysql.TypeVarchar, mysql.TypeString, mysql.TypeVarString,
		mysql.TypeBlob, mysql.TypeTinyBlob, mysql.TypeMediumBlob, mysql.TypeLongBlob:
		b := []byte(s)
		if ft.GetCharset() == "binary" {
			return value.NewBytesDatum(b), nil
		}
		return value.NewStringDatumBytes(b), nil
	case mysql.TypeNewDecimal:
		dec, err := value.ParseDecimal(strings.TrimSpace(s))
		if err != nil {
			return value.Datum{}, fmt.Errorf("origin default %q: %v", s, err)
		}
		prec, frac := ft.GetFlen(), ft.GetDecimal()
		if frac < 0 || prec <= 0 {
			return value.NewDecimalDatum(dec, 0, 0)
		}
		if dec.Frac() != frac {
			if dec, err = dec.Round(frac); err != nil {
				return value.Datum{}, fmt.Errorf("origin default %q: %v", s, err)
			}
		}
		return value.NewDecimalDatum(dec, prec, frac)
	case mysql.TypeDate, mysql.TypeDatetime, mysql.TypeTimestamp:
		fsp := 0
		if tp != mysql.TypeDate {
			fsp = clampFsp(ft.GetDecimal())
		}
		t, err := value.ParseTime(strings.TrimSpace(s), tp, fsp)
		if err != nil {
			return value.Datum{}, fmt.Errorf("origin default %q: %v", s, err)
		}
		// TIMESTAMP defaults are kept in UTC by TiDB for columns of
		// version >= 1; older columns hold the DDL session's zone, which
		// the schema does not record: they are taken as UTC (rule MT12).
		return value.NewTimeDatum(t.Pack(), tp, fsp), nil
	case mysql.TypeDuration:
		d, err := value.ParseDuration(strings.TrimSpace(s), clampFsp(ft.GetDecimal()))
		if err != nil {
			return value.Datum{}, fmt.Errorf("origin default %q: %v", s, err)
		}
		return value.NewDurationDatum(d.Nanos, d.Fsp), nil
	case mysql.TypeEnum:
		idx, err := value.EnumIndex(ft.GetElems(), s)
		if err != nil {
			return value.Datum{}, fmt.Errorf("origin default: %v", err)
		}
		name, _ := value.EnumName(ft.GetElems(), idx)
		return value.NewEnumDatum(idx, name), nil
	case mysql.TypeSet:
		bits, err := value.SetBits(ft.GetElems(), s)
		if err != nil {
			return value.Datum{}, fmt.Errorf("origin default: %v", err)
		}
		names, err := value.SetNames(ft.GetElems(), bits)
		if err != nil {
			return value.Datum{}, fmt.Errorf("origin default: %v", err)
		}
		return value.NewSetDatum(bits, names), nil
	case mysql.TypeBit:
		// Without origin_default_bit the default string holds the raw bytes.
		v, err := value.BitValue([]byte(s))
		if err != nil {
			return value.Datum{}, fmt.Errorf("origin default %q: %v", s, err)
		}
		return value.NewBitDatum(v, bitWidth(ft.GetFlen())), nil
	case mysql.TypeJSON:
		j, err := value.ParseJSON([]byte(s))
		if err != nil {
			return value.Datum{}, fmt.Errorf("origin default %q: %v", s, err)
		}
		return value.NewJSONDatum(j.AppendTyped(nil)), nil
	case mysql.TypeTiDBVectorFloat32:
		elems, err := value.ParseVectorFloat32(s)
		if err != nil {
			return value.Datum{}, fmt.Errorf("origin default %q: %v", s, err)
		}
		b, err := value.AppendVectorFloat32(nil, elems)
		if err != nil {
			return value.Datum{}, fmt.Errorf("origin default %q: %v", s, err)
		}
		return value.NewVectorFloat32Datum(b), nil
	}
	return value.Datum{}, fmt.Errorf("origin default %q for column type %d is not supported", s, tp)
}

// zeroValue is what a NOT NULL column without any default holds in rows
// written before it existed (TiCDC's rule: ENUM takes its first member,
// strings are empty, numbers and times are zero, JSON is null).
func zeroValue(ci *model.ColumnInfo) (value.Datum, error) {
	ft := &ci.FieldType
	switch tp := ft.GetType(); tp {
	case mysql.TypeTiny, mysql.TypeShort, mysql.TypeInt24, mysql.TypeLong, mysql.TypeLonglong:
		if mysql.HasUnsignedFlag(ft.GetFlag()) {
			return value.NewUintDatum(0), nil
		}
		return value.NewIntDatum(0), nil
	case mysql.TypeYear:
		return value.NewYearDatum(0), nil
	case mysql.TypeFloat:
		return value.NewFloat32Datum(0), nil
	case mysql.TypeDouble:
		return value.NewFloat64Datum(0), nil
	case mysql.TypeNewDecimal:
		return parseDefault(ci, "0")
	case mysql.TypeDate, mysql.TypeDatetime, mysql.TypeTimestamp:
		fsp := 0
		if tp != mysql.TypeDate {
			fsp = clampFsp(ft.GetDecimal())
		}
		return value.NewTimeDatum(0, tp, fsp), nil
	case mysql.TypeDuration:
		return value.NewDurationDatum(0, clampFsp(ft.GetDecimal())), nil
	case mysql.TypeEnum:
		if elems := ft.GetElems(); len(elems) > 0 {
			return value.NewEnumDatum(1, elems[0]), nil
		}
		return value.NewEnumDatum(0, ""), nil
	case mysql.TypeSet:
		return value.NewSetDatum(0, ""), nil
	case mysql.TypeBit:
		return value.NewBitDatum(0, bitWidth(ft.GetFlen())), nil
	case mysql.TypeJSON:
		return parseDefault(ci, "null")
	case mysql.TypeTiDBVectorFloat32:
		return parseDefault(ci, "[]")
	default:
		return parseDefault(ci, "")
	}
}

func clampFsp(d int) int {
	if d < 0 {
		return 0
	}
	if d > value.MaxFsp {
		return value.MaxFsp
	}
	return d
}
