package emulator

import (
	"bytes"
	"fmt"
	"math"
	"strings"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
	"github.com/searchfabric/sfemu/emulator/docstore"
)

// filterSet is a validated AND of filters (E73, E74).
type filterSet []*apiv1.Filter

func isNumericKind(v *apiv1.Value) bool {
	switch v.GetKind().(type) {
	case *apiv1.Value_Int64Value, *apiv1.Value_Uint64Value, *apiv1.Value_DoubleValue:
		return true
	}
	return false
}

// filterKindOK says whether a filter operand fits a field type.
func filterKindOK(t apiv1.FieldType, v *apiv1.Value) bool {
	switch contract.KindFor(t) {
	case "int64_value", "uint64_value", "double_value":
		return isNumericKind(v)
	case "string_value":
		_, ok := v.GetKind().(*apiv1.Value_StringValue)
		return ok
	case "bool_value":
		_, ok := v.GetKind().(*apiv1.Value_BoolValue)
		return ok
	case "bytes_value":
		_, ok := v.GetKind().(*apiv1.Value_BytesValue)
		return ok
	case "json_value":
		switch v.GetKind().(type) {
		case *apiv1.Value_JsonValue, *apiv1.Value_StringValue:
			return true
		}
	}
	return false
}

func compileFilters(s *contract.Schema, filters []*apiv1.Filter) (filterSet, error) {
	for i, f := range filters {
		p := fmt.Sprintf("filters[%d]", i)
		fd, ok := s.Fields[f.GetField()]
		if !ok {
			return nil, contract.Errf(contract.ReasonInvalidQuery, p+".field", "a field of "+s.Def.GetName(), f.GetField(), "unknown filter field")
		}
		if fd.GetType() == apiv1.FieldType_FIELD_TYPE_VECTOR {
			return nil, contract.Errf(contract.ReasonInvalidQuery, p+".field", "a scalar field", f.GetField(), "vector fields cannot be filtered")
		}
		var operands []*apiv1.Value
		switch f.GetOp() {
		case apiv1.FilterOp_FILTER_OP_EQ, apiv1.FilterOp_FILTER_OP_NE, apiv1.FilterOp_FILTER_OP_LT, apiv1.FilterOp_FILTER_OP_LTE,
			apiv1.FilterOp_FILTER_OP_GT, apiv1.FilterOp_FILTER_OP_GTE:
			if f.GetValue() == nil {
				return nil, contract.Errf(contract.ReasonInvalidQuery, p+".value", "a value", "none", "%s needs a value", f.GetOp())
			}
			operands = []*apiv1.Value{f.GetValue()}
		case apiv1.FilterOp_FILTER_OP_IN:
			if len(f.GetValues()) == 0 {
				return nil, contract.Errf(contract.ReasonInvalidQuery, p+".values", "at least one value", "none", "IN needs values")
			}
			operands = f.GetValues()
		case apiv1.FilterOp_FILTER_OP_PREFIX:
			if _, ok := f.GetValue().GetKind().(*apiv1.Value_StringValue); !ok || contract.KindFor(fd.GetType()) != "string_value" {
				return nil, contract.Errf(contract.ReasonInvalidQuery, p+".value", "a string value on a string field", fd.GetType().String(), "PREFIX works on string fields")
			}
		case apiv1.FilterOp_FILTER_OP_IS_NULL:
		default:
			return nil, contract.Errf(contract.ReasonInvalidQuery, p+".op", "a FilterOp", f.GetOp().String(), "unknown filter op")
		}
		for j, v := range operands {
			if !filterKindOK(fd.GetType(), v) {
				return nil, contract.Errf(contract.ReasonInvalidQuery, fmt.Sprintf("%s.values[%d]", p, j), contract.KindFor(fd.GetType()), fmt.Sprintf("%T", v.GetKind()), "operand does not fit field %q", fd.GetName())
			}
			if d, ok := v.GetKind().(*apiv1.Value_DoubleValue); ok && math.IsNaN(d.DoubleValue) {
				return nil, contract.Errf(contract.ReasonInvalidQuery, fmt.Sprintf("%s.values[%d]", p, j), "a number", "NaN", "NaN operand")
			}
		}
	}
	return filterSet(filters), nil
}

// match reports whether ent passes every filter. sc holds the one field
// value decoded at a time (E45): a scan reads a field of every document
// without an allocation per read.
func (fs filterSet) match(ent *docstore.Entry, sc *docstore.Scratch) bool {
	for _, f := range fs {
		if !matchOne(f, ent.FieldScratch(f.GetField(), sc)) {
			return false
		}
	}
	return true
}

func isNull(v *apiv1.Value) bool {
	switch v.GetKind().(type) {
	case nil, *apiv1.Value_NullValue:
		return true
	}
	return false
}

func matchOne(f *apiv1.Filter, v *apiv1.Value) bool {
	if f.GetOp() == apiv1.FilterOp_FILTER_OP_IS_NULL {
		return isNull(v)
	}
	if isNull(v) {
		return false // SQL semantics: comparisons with null are not true
	}
	switch f.GetOp() {
	case apiv1.FilterOp_FILTER_OP_IN:
		for _, o := range f.GetValues() {
			if c, ok := compareValues(v, o); ok && c == 0 {
				return true
			}
		}
		return false
	case apiv1.FilterOp_FILTER_OP_PREFIX:
		return strings.HasPrefix(v.GetStringValue(), f.GetValue().GetStringValue())
	}
	c, ok := compareValues(v, f.GetValue())
	if !ok {
		return false
	}
	switch f.GetOp() {
	case apiv1.FilterOp_FILTER_OP_EQ:
		return c == 0
	case apiv1.FilterOp_FILTER_OP_NE:
		return c != 0
	case apiv1.FilterOp_FILTER_OP_LT:
		return c < 0
	case apiv1.FilterOp_FILTER_OP_LTE:
		return c <= 0
	case apiv1.FilterOp_FILTER_OP_GT:
		return c > 0
	case apiv1.FilterOp_FILTER_OP_GTE:
		return c >= 0
	}
	return false
}

// compareValues orders two values of compatible kinds: numbers across
// int64/uint64/double (exact for integers), strings and bytes bytewise,
// bools false < true, JSON by text. ok is false for incomparable kinds.
func compareValues(a, b *apiv1.Value) (int, bool) {
	if isNumericKind(a) && isNumericKind(b) {
		return compareNumbers(a, b), true
	}
	switch x := a.GetKind().(type) {
	case *apiv1.Value_StringValue:
		switch y := b.GetKind().(type) {
		case *apiv1.Value_StringValue:
			return strings.Compare(x.StringValue, y.StringValue), true
		case *apiv1.Value_JsonValue:
			return strings.Compare(x.StringValue, y.JsonValue), true
		}
	case *apiv1.Value_JsonValue:
		switch y := b.GetKind().(type) {
		case *apiv1.Value_StringValue:
			return strings.Compare(x.JsonValue, y.StringValue), true
		case *apiv1.Value_JsonValue:
			return strings.Compare(x.JsonValue, y.JsonValue), true
		}
	case *apiv1.Value_BytesValue:
		if y, ok := b.GetKind().(*apiv1.Value_BytesValue); ok {
			return bytes.Compare(x.BytesValue, y.BytesValue), true
		}
	case *apiv1.Value_BoolValue:
		if y, ok := b.GetKind().(*apiv1.Value_BoolValue); ok {
			switch {
			case x.BoolValue == y.BoolValue:
				return 0, true
			case !x.BoolValue:
				return -1, true
			default:
				return 1, true
			}
		}
	}
	return 0, false
}

func compareNumbers(a, b *apiv1.Value) int {
	ai, aIsI := a.GetKind().(*apiv1.Value_Int64Value)
	au, aIsU := a.GetKind().(*apiv1.Value_Uint64Value)
	bi, bIsI := b.GetKind().(*apiv1.Value_Int64Value)
	bu, bIsU := b.GetKind().(*apiv1.Value_Uint64Value)
	switch {
	case aIsI && bIsI:
		return cmp3(ai.Int64Value < bi.Int64Value, ai.Int64Value > bi.Int64Value)
	case aIsU && bIsU:
		return cmp3(au.Uint64Value < bu.Uint64Value, au.Uint64Value > bu.Uint64Value)
	case aIsI && bIsU:
		if ai.Int64Value < 0 {
			return -1
		}
		x := uint64(ai.Int64Value)
		return cmp3(x < bu.Uint64Value, x > bu.Uint64Value)
	case aIsU && bIsI:
		return -compareNumbers(b, a)
	}
	x, y := asFloat(a), asFloat(b)
	return cmp3(x < y, x > y)
}

func asFloat(v *apiv1.Value) float64 {
	switch k := v.GetKind().(type) {
	case *apiv1.Value_Int64Value:
		return float64(k.Int64Value)
	case *apiv1.Value_Uint64Value:
		return float64(k.Uint64Value)
	case *apiv1.Value_DoubleValue:
		return k.DoubleValue
	}
	return math.NaN()
}

func cmp3(less, greater bool) int {
	switch {
	case less:
		return -1
	case greater:
		return 1
	}
	return 0
}
