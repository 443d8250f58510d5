package apiv1

// Hand-written helpers for the canonical forms the contract defines
// (specs/emulator-contract.md). Adapters and the emulator both use them so the
// two sides agree on the exact bytes.

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// InitialGenerationToken is the schema_generation_token a fence carries when
// the collection has no lineage yet (the zero-state tuple, E23).
const InitialGenerationToken = "__initial__"

// PartitionName returns the canonical source_partition for a physical table
// id: "keyspace:<id>/table:<physical id>" when a keyspace is set, else
// "table:<physical id>" (E13).
func PartitionName(keyspaceID uint32, physicalTableID int64) string {
	if keyspaceID != 0 {
		return "keyspace:" + strconv.FormatUint(uint64(keyspaceID), 10) + "/table:" + strconv.FormatInt(physicalTableID, 10)
	}
	return "table:" + strconv.FormatInt(physicalTableID, 10)
}

// ParsePartitionName is the inverse of PartitionName. It rejects anything that
// is not exactly one of the two canonical forms.
func ParsePartitionName(s string) (keyspaceID uint32, physicalTableID int64, err error) {
	rest := s
	if strings.HasPrefix(rest, "keyspace:") {
		rest = rest[len("keyspace:"):]
		i := strings.IndexByte(rest, '/')
		if i < 0 {
			return 0, 0, fmt.Errorf("source_partition %q: missing \"/table:<id>\" after keyspace", s)
		}
		ks, perr := strconv.ParseUint(rest[:i], 10, 32)
		if perr != nil || ks == 0 || strconv.FormatUint(ks, 10) != rest[:i] {
			return 0, 0, fmt.Errorf("source_partition %q: keyspace id %q is not a canonical non-zero uint32", s, rest[:i])
		}
		keyspaceID = uint32(ks)
		rest = rest[i+1:]
	}
	if !strings.HasPrefix(rest, "table:") {
		return 0, 0, fmt.Errorf("source_partition %q: expected \"table:<physical id>\"", s)
	}
	num := rest[len("table:"):]
	id, perr := strconv.ParseInt(num, 10, 64)
	if perr != nil || id <= 0 || strconv.FormatInt(id, 10) != num {
		return 0, 0, fmt.Errorf("source_partition %q: table id %q is not a canonical positive int64", s, num)
	}
	return keyspaceID, id, nil
}

// KeyComponent renders one primary-key value in its canonical text form
// (E14): decimal for INT/UINT/BIT, shortest round-trip for FLOAT, "true" /
// "false" for BOOL, lowercase hex for BYTES and the string itself for the
// string-carried types. Null, JSON and vector values cannot be key
// components.
func KeyComponent(v *Value) (string, error) {
	switch k := v.GetKind().(type) {
	case *Value_Int64Value:
		return strconv.FormatInt(k.Int64Value, 10), nil
	case *Value_Uint64Value:
		return strconv.FormatUint(k.Uint64Value, 10), nil
	case *Value_DoubleValue:
		return strconv.FormatFloat(k.DoubleValue, 'g', -1, 64), nil
	case *Value_StringValue:
		return k.StringValue, nil
	case *Value_BytesValue:
		return hex.EncodeToString(k.BytesValue), nil
	case *Value_BoolValue:
		return strconv.FormatBool(k.BoolValue), nil
	case nil:
		return "", fmt.Errorf("primary-key value is missing")
	case *Value_NullValue:
		return "", fmt.Errorf("primary-key value is null")
	default:
		return "", fmt.Errorf("primary-key value of kind %T cannot be a key component", k)
	}
}

// JoinKey joins rendered key components into the canonical primary_key
// string (E14). A single component is used as is. Several components are
// joined with ',' after escaping '\' as "\\" and ',' as "\,".
func JoinKey(components []string) string {
	if len(components) == 1 {
		return components[0]
	}
	var b strings.Builder
	for i, c := range components {
		if i > 0 {
			b.WriteByte(',')
		}
		for j := 0; j < len(c); j++ {
			if c[j] == '\\' || c[j] == ',' {
				b.WriteByte('\\')
			}
			b.WriteByte(c[j])
		}
	}
	return b.String()
}

// SplitKey is the inverse of JoinKey for a key of n components.
func SplitKey(key string, n int) ([]string, error) {
	if n == 1 {
		return []string{key}, nil
	}
	out := make([]string, 0, n)
	var cur strings.Builder
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch c {
		case '\\':
			if i+1 >= len(key) || (key[i+1] != '\\' && key[i+1] != ',') {
				return nil, fmt.Errorf("primary key %q: bad escape at offset %d", key, i)
			}
			cur.WriteByte(key[i+1])
			i++
		case ',':
			out = append(out, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	out = append(out, cur.String())
	if len(out) != n {
		return nil, fmt.Errorf("primary key %q: expected %d components, got %d", key, n, len(out))
	}
	return out, nil
}

// EncodePrimaryKey builds the canonical primary_key of a row image from the
// definition's primary-key fields in key order.
func EncodePrimaryKey(def *CollectionDefinition, fields map[string]*Value) (string, error) {
	pk := def.GetPrimaryKey()
	if len(pk) == 0 {
		return "", fmt.Errorf("collection %q has no primary key", def.GetName())
	}
	comps := make([]string, len(pk))
	for i, name := range pk {
		v, ok := fields[name]
		if !ok {
			return "", fmt.Errorf("primary-key field %q missing from row", name)
		}
		c, err := KeyComponent(v)
		if err != nil {
			return "", fmt.Errorf("primary-key field %q: %w", name, err)
		}
		comps[i] = c
	}
	return JoinKey(comps), nil
}
