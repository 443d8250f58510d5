package sqlfront

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/types"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/rowcodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// Index KVs as TiDB writes them (facts §3.2, §3.6): the key is the index
// prefix, the key form of the indexed values (strings as collation sort
// keys) and, unless the index is unique and no value is NULL ("distinct"),
// the handle; the value is the old layout (the int handle of a distinct
// entry, else "0") unless something must ride along: restore data for
// lossy string columns (version 0), or, on a clustered table, always the
// clustered v1 layout with the common handle of distinct entries. Rule S20.

// storedIndexes are the indexes that have KVs of their own: every public
// index but a clustered primary key (its record key is the index).
func storedIndexes(ti *model.TableInfo) []*model.IndexInfo {
	out := make([]*model.IndexInfo, 0, len(ti.Indices))
	for _, idx := range ti.Indices {
		if idx.State != model.StatePublic || (idx.Primary && ti.IsCommonHandle) {
			continue
		}
		out = append(out, idx)
	}
	return out
}

// isBinCollation: the PAD SPACE binary collations, whose key form only
// drops trailing spaces (TiDB's collate.IsBinCollation).
func isBinCollation(c string) bool {
	switch strings.ToLower(c) {
	case "utf8mb4_bin", "utf8_bin", "ascii_bin", "latin1_bin", "gbk_bin", "gb18030_bin":
		return true
	}
	return false
}

// typeNeedsRestoredData is TiDB's types.NeedRestoredData under new
// collation: a non-binary string whose key form loses bytes — any
// collation but binary and utf8mb4_0900_bin, except CHAR/TEXT under a
// *_bin collation (padding semantics give back what the key dropped).
func typeNeedsRestoredData(ft *types.FieldType) bool {
	switch ft.GetType() {
	case mysql.TypeString, mysql.TypeVarchar, mysql.TypeVarString,
		mysql.TypeBlob, mysql.TypeTinyBlob, mysql.TypeMediumBlob, mysql.TypeLongBlob:
	default:
		return false
	}
	c := ft.GetCollate()
	if ft.GetCharset() == "binary" || c == "binary" || strings.EqualFold(c, "utf8mb4_0900_bin") {
		return false
	}
	varchar := ft.GetType() == mysql.TypeVarchar || ft.GetType() == mysql.TypeVarString
	return !isBinCollation(c) || varchar
}

// checkIndexable refuses, at DDL time, index columns whose key form the
// codec cannot produce exactly (collations without a sort key here, JSON,
// vectors), so no DML can later fail on them.
func checkIndexable(ti *model.TableInfo, idx *model.IndexInfo) error {
	for _, ic := range idx.Columns {
		ft := &ti.Columns[ic.Offset].FieldType
		switch ft.GetType() {
		case mysql.TypeJSON, mysql.TypeTiDBVectorFloat32:
			return unsupported("index %q on %s column %q", idx.Name.O, types.TypeToStr(ft.GetType(), ""), ic.Name.O)
		}
		if isStringType(ft) {
			if _, err := codec.SortKey(ft.GetCollate(), nil); err != nil {
				return unsupported("index %q on column %q with collation %s", idx.Name.O, ic.Name.O, ft.GetCollate())
			}
		}
	}
	return nil
}

func isStringType(ft *types.FieldType) bool {
	switch ft.GetType() {
	case mysql.TypeString, mysql.TypeVarchar, mysql.TypeVarString,
		mysql.TypeBlob, mysql.TypeTinyBlob, mysql.TypeMediumBlob, mysql.TypeLongBlob:
		return true
	}
	return false
}

// keyDatum is d as it appears in keys: strings become their collation
// sort key.
func keyDatum(col *model.ColumnInfo, d value.Datum) (value.Datum, error) {
	if d.Kind() != value.KindString && d.Kind() != value.KindBytes {
		return d, nil
	}
	sk, err := codec.SortKey(col.FieldType.GetCollate(), d.GetBytes())
	if err != nil {
		return d, err
	}
	return value.NewBytesDatum(sk), nil
}

// indexKV is one index entry of a row.
type indexKV struct {
	key, value []byte
	// distinct: unique index and no NULL value — the key alone must be
	// unique and carries no handle.
	distinct bool
}

// indexValues are the datums of idx's columns in row datums.
func indexValues(idx *model.IndexInfo, datums []value.Datum) []value.Datum {
	out := make([]value.Datum, len(idx.Columns))
	for i, ic := range idx.Columns {
		out[i] = datums[ic.Offset]
	}
	return out
}

// encodeIndexKV builds the entry of idx for a row of physical table phys
// with handle h.
func (s *Server) encodeIndexKV(ti *model.TableInfo, idx *model.IndexInfo, phys int64, datums []value.Datum, h tablecodec.Handle) (indexKV, error) {
	vals := indexValues(idx, datums)
	key, distinct, err := encodeIndexKey(ti, idx, phys, vals, h)
	if err != nil {
		return indexKV{}, err
	}
	var iv tablecodec.IndexValue
	if ti.IsCommonHandle && ti.CommonHandleVersion == 1 {
		iv.Clustered = true
		if distinct {
			iv.CommonHandle = h.Encoded()
		}
		rd, err := s.clusteredRestoreData(ti, idx, vals, datums)
		if err != nil {
			return indexKV{}, err
		}
		iv.RestoreData = rd
	} else {
		if distinct {
			if h.IsInt() {
				iv.IntHandle, iv.HasIntHandle = h.IntValue(), true
			} else {
				iv.CommonHandle = h.Encoded()
			}
		}
		need := false
		for _, ic := range idx.Columns {
			need = need || typeNeedsRestoredData(&ti.Columns[ic.Offset].FieldType)
		}
		if need {
			// Version 0 carries the original value of every index column.
			ids := make([]int64, len(idx.Columns))
			for i, ic := range idx.Columns {
				ids[i] = ti.Columns[ic.Offset].ID
			}
			if iv.RestoreData, err = s.encodeRestore(ids, vals); err != nil {
				return indexKV{}, fmt.Errorf("sqlfront: restore data of index %q of table %q: %w", idx.Name.O, ti.Name.O, err)
			}
		}
	}
	// With nothing but an int handle AppendIndexValue writes the old
	// layout (the handle's 8 bytes, or "0"), as TiDB does.
	return indexKV{key: key, value: tablecodec.AppendIndexValue(nil, iv), distinct: distinct}, nil
}

// encodeIndexKey is the key of idx's entry for index column values vals
// of a row of physical table phys with handle h, and whether the entry is
// distinct (a deletion needs the key only).
func encodeIndexKey(ti *model.TableInfo, idx *model.IndexInfo, phys int64, vals []value.Datum, h tablecodec.Handle) ([]byte, bool, error) {
	keyVals := make([]value.Datum, len(vals))
	distinct := idx.Unique
	for i, ic := range idx.Columns {
		if vals[i].IsNull() {
			distinct = false
		}
		d, err := keyDatum(ti.Columns[ic.Offset], vals[i])
		if err != nil {
			return nil, false, fmt.Errorf("sqlfront: index %q of table %q: %w", idx.Name.O, ti.Name.O, err)
		}
		keyVals[i] = d
	}
	key, err := tablecodec.EncodeIndexKey(nil, phys, idx.ID, idx.Unique, keyVals, h)
	if err != nil {
		return nil, false, fmt.Errorf("sqlfront: index %q of table %q: %w", idx.Name.O, ti.Name.O, err)
	}
	return key, distinct, nil
}

func (s *Server) encodeRestore(ids []int64, vals []value.Datum) ([]byte, error) {
	var enc rowcodec.Encoder
	return enc.EncodeV2(nil, ids, vals, nil)
}

// clusteredRestoreData is the restore segment of the clustered v1 layout:
// the lossy non-primary index columns (under a *_bin collation only their
// count of trailing spaces), then the lossy primary-key columns (the
// handle's restore data), as TiDB's GenIndexValueForClusteredIndexVersion1.
// nil when nothing needs restoring.
func (s *Server) clusteredRestoreData(ti *model.TableInfo, idx *model.IndexInfo, vals, datums []value.Datum) ([]byte, error) {
	idxNeeds := false
	for _, ic := range idx.Columns {
		idxNeeds = idxNeeds || typeNeedsRestoredData(&ti.Columns[ic.Offset].FieldType)
	}
	var ids []int64
	var rd []value.Datum
	for i, ic := range idx.Columns {
		col := ti.Columns[ic.Offset]
		if mysql.HasPriKeyFlag(col.FieldType.GetFlag()) || !typeNeedsRestoredData(&col.FieldType) {
			continue
		}
		ids = append(ids, col.ID)
		rd = append(rd, restoreDatum(col, vals[i]))
	}
	handleRestore := false
	if pk := ti.PrimaryIndex(); pk != nil {
		for _, ic := range pk.Columns {
			col := ti.Columns[ic.Offset]
			if !typeNeedsRestoredData(&col.FieldType) {
				continue
			}
			handleRestore = true
			ids = append(ids, col.ID)
			rd = append(rd, restoreDatum(col, datums[ic.Offset]))
		}
	}
	if !idxNeeds && !handleRestore {
		return nil, nil
	}
	b, err := s.encodeRestore(ids, rd)
	if err != nil {
		return nil, fmt.Errorf("sqlfront: restore data of index %q of table %q: %w", idx.Name.O, ti.Name.O, err)
	}
	return b, nil
}

// restoreDatum: under a *_bin collation the key lost only trailing
// spaces, so their count is enough; otherwise the original value.
func restoreDatum(col *model.ColumnInfo, d value.Datum) value.Datum {
	if isBinCollation(col.FieldType.GetCollate()) && (d.Kind() == value.KindString || d.Kind() == value.KindBytes) {
		b := d.GetBytes()
		return value.NewUintDatum(uint64(len(b) - len(bytes.TrimRight(b, " "))))
	}
	return d
}

// handleFromIndex finds the row handle of an index entry: in the value
// (distinct entries) or as the key's suffix after the indexed values.
func handleFromIndex(ti *model.TableInfo, idx *model.IndexInfo, key, val []byte) (tablecodec.Handle, error) {
	iv, err := tablecodec.DecodeIndexValue(val)
	if err != nil {
		return tablecodec.Handle{}, err
	}
	if iv.HasIntHandle {
		return tablecodec.NewIntHandle(iv.IntHandle), nil
	}
	if iv.CommonHandle != nil {
		return tablecodec.NewCommonHandle(append([]byte(nil), iv.CommonHandle...))
	}
	_, _, rest, err := tablecodec.DecodeIndexKey(key)
	if err != nil {
		return tablecodec.Handle{}, err
	}
	for range idx.Columns {
		if _, rest, err = codec.CutOne(rest); err != nil {
			return tablecodec.Handle{}, fmt.Errorf("index %q key %x: %w", idx.Name.O, key, err)
		}
	}
	if !ti.IsCommonHandle {
		if len(rest) != 9 || rest[0] != codec.IntFlag {
			return tablecodec.Handle{}, fmt.Errorf("index %q key %x: no int handle after the values", idx.Name.O, key)
		}
		_, v, err := codec.DecodeInt(rest[1:])
		return tablecodec.NewIntHandle(v), err
	}
	return tablecodec.NewCommonHandle(append([]byte(nil), rest...))
}

// duplicateIndexEntry is the error of a unique index entry that another
// row holds, worded as TiDB's.
func duplicateIndexEntry(ti *model.TableInfo, idx *model.IndexInfo, datums []value.Datum) error {
	parts := make([]string, len(idx.Columns))
	for i, ic := range idx.Columns {
		parts[i] = datums[ic.Offset].String()
	}
	name := idx.Name.O
	if !idx.Primary {
		name = ti.Name.O + "." + name
	}
	return &duplicateError{msg: fmt.Sprintf("sqlfront: Duplicate entry '%s' for key '%s'", strings.Join(parts, "-"), name)}
}

// duplicateError is a unique index violation; errors.Is matches it with
// ErrDuplicateKey, as a primary key violation (S4).
type duplicateError struct{ msg string }

func (e *duplicateError) Error() string        { return e.msg }
func (e *duplicateError) Is(target error) bool { return target == ErrDuplicateKey }
