package sqlfront

import (
	"fmt"
	"math"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// Access paths (S21): a WHERE is answered by the cheapest of
//   - point gets of record keys: equality / IN on the int handle (integer
//     primary key or `_tidb_rowid`), equality on every clustered-key column;
//   - a point get of a unique index entry: equality on all its columns;
//   - a record range scan: bounds on a signed int handle, or equality on
//     leading clustered-key columns (a key prefix);
//   - an index prefix scan: equality on leading columns of an index;
//   - otherwise a scan of the whole table, a page at a time.
// Every row found is still checked against the whole WHERE, so a path only
// has to return a superset of the matching rows.

// scanPage is how many pairs one page of a range scan reads.
const scanPage = 1024

// accessPlan is the chosen path.
type accessPlan struct {
	// points are handles to get, per physical table (nil phys: all).
	points []accessPoint
	// ranges are raw key ranges of record keys to scan.
	ranges []keyRange
	// index, when set, is scanned over ranges of its keys instead.
	index *model.IndexInfo
	// full: scan every physical table.
	full bool
}

type accessPoint struct {
	phys []int64
	h    tablecodec.Handle
}

// keyRange is [start, end); point: the range holds at most the one key
// start (a unique index entry of non-NULL values), read by a point get
// instead of a scan.
type keyRange struct {
	start, end []byte
	point      bool
}

// eachRow calls fn for every row the plan reaches (visible to txn, own
// writes included), stopping at fn's first error.
func (s *Server) eachRow(txn *fakeupstream.Txn, ti *model.TableInfo, p *accessPlan, fn func(*row) error) error {
	m := s.m
	get := func(phys int64, h tablecodec.Handle) error {
		key := tablecodec.EncodeRecordKey(nil, phys, h)
		v, err := txn.Get(key)
		if err != nil || v == nil {
			return err
		}
		r, err := decodeRow(m, ti, phys, key, v)
		if err != nil {
			return err
		}
		return fn(r)
	}
	switch {
	case p.points != nil:
		for _, pt := range p.points {
			for _, phys := range pt.phys {
				if err := get(phys, pt.h); err != nil {
					return err
				}
			}
		}
		return nil
	case p.index != nil:
		for _, kr := range p.ranges {
			phys, _, _, err := tablecodec.DecodeIndexKey(kr.start)
			if err != nil {
				return err
			}
			entry := func(k, v []byte) error {
				h, err := handleFromIndex(ti, p.index, k, v)
				if err != nil {
					return err
				}
				return get(phys, h)
			}
			if kr.point {
				v, err := txn.Get(kr.start)
				if err != nil {
					return err
				}
				if v != nil {
					if err := entry(kr.start, v); err != nil {
						return err
					}
				}
				continue
			}
			if err := scanPaged(txn, kr, entry); err != nil {
				return err
			}
		}
		return nil
	}
	ranges := p.ranges
	if p.full {
		ranges = nil
		for _, phys := range ti.PhysicalIDs() {
			start := tablecodec.EncodeRecordPrefix(nil, phys)
			ranges = append(ranges, keyRange{start: start, end: tablecodec.PrefixNext(start)})
		}
	}
	for _, kr := range ranges {
		phys := tablecodec.DecodeTableID(kr.start)
		if err := scanPaged(txn, kr, func(k, v []byte) error {
			r, err := decodeRow(m, ti, phys, k, v)
			if err != nil {
				return err
			}
			return fn(r)
		}); err != nil {
			return err
		}
	}
	return nil
}

// scanPaged reads [kr.start, kr.end) scanPage pairs at a time.
func scanPaged(txn *fakeupstream.Txn, kr keyRange, fn func(k, v []byte) error) error {
	cur := kr.start
	for {
		kvs, err := txn.Scan(cur, kr.end, scanPage)
		if err != nil {
			return err
		}
		for _, kv := range kvs {
			if err := fn(kv.Key, kv.Value); err != nil {
				return err
			}
		}
		if len(kvs) < scanPage {
			return nil
		}
		cur = append(kvs[len(kvs)-1].Key, 0)
	}
}

// planAccess picks the access path for f on ti.
func (s *Server) planAccess(ti *model.TableInfo, f *filter) (*accessPlan, error) {
	for i := range f.conds {
		if f.conds[i].kind == condFalse || (f.conds[i].kind == condIn && len(f.conds[i].vals) == 0) {
			return &accessPlan{points: []accessPoint{}}, nil
		}
	}
	hi, err := ti.HandleColumns()
	if err != nil {
		return nil, err
	}
	switch hi.Kind {
	case model.HandleInt, model.HandleRowID:
		if p := planIntHandle(ti, hi, f); p != nil {
			return p, nil
		}
	case model.HandleCommon:
		if p, err := planCommonHandle(ti, f); p != nil || err != nil {
			return p, err
		}
	}
	if p, err := planIndex(ti, f); p != nil || err != nil {
		return p, err
	}
	return &accessPlan{full: true}, nil
}

// handleConds are the conditions on the int handle.
func handleConds(hi model.HandleInfo, f *filter) []*cond {
	var out []*cond
	for i := range f.conds {
		c := &f.conds[i]
		if (hi.Kind == model.HandleRowID && c.rowID) || (hi.Kind == model.HandleInt && c.col != nil && c.col.ID == hi.Columns[0].Column.ID) {
			out = append(out, c)
		}
	}
	return out
}

func intHandleOf(d value.Datum) tablecodec.Handle {
	if d.Kind() == value.KindUint64 {
		return tablecodec.NewIntHandle(int64(d.GetUint64()))
	}
	return tablecodec.NewIntHandle(d.GetInt64())
}

// physFor lists the physical tables a row whose column col equals d can
// live in: one partition when col is the partitioning column.
func physFor(ti *model.TableInfo, col *model.ColumnInfo, d value.Datum) []int64 {
	if ti.Partition == nil {
		return []int64{ti.ID}
	}
	if col != nil {
		ds := make([]value.Datum, len(ti.Columns))
		ds[col.Offset] = d
		if pc := partitionColumn(ti); pc != nil && pc.ID == col.ID {
			if phys, err := partitionOf(ti, ds); err == nil {
				return []int64{phys}
			}
		}
	}
	return ti.PhysicalIDs()
}

func planIntHandle(ti *model.TableInfo, hi model.HandleInfo, f *filter) *accessPlan {
	conds := handleConds(hi, f)
	var col *model.ColumnInfo
	if hi.Kind == model.HandleInt {
		col = hi.Columns[0].Column
	}
	for _, c := range conds {
		if c.kind == condIn || (c.kind == condCmp && c.op == opcode.EQ) {
			p := &accessPlan{points: []accessPoint{}}
			seen := make(map[int64]bool, len(c.vals))
			for _, d := range c.vals {
				h := intHandleOf(d)
				if !seen[h.IntValue()] { // IN (1, 1) reaches the row once
					seen[h.IntValue()] = true
					p.points = append(p.points, accessPoint{phys: physFor(ti, col, d), h: h})
				}
			}
			return p
		}
	}
	// Bounds only for signed handles: an unsigned key's handle order is
	// not its value order (values >= 2^63 sort first).
	if col != nil && mysql.HasUnsignedFlag(col.FieldType.GetFlag()) {
		return nil
	}
	lo, hiv, bounded := int64(math.MinInt64), int64(math.MaxInt64), false
	for _, c := range conds {
		switch c.kind {
		case condBetween:
			lo, hiv, bounded = max(lo, c.vals[0].GetInt64()), min(hiv, c.vals[1].GetInt64()), true
		case condCmp:
			v := c.vals[0].GetInt64()
			switch c.op {
			case opcode.GT:
				if v == math.MaxInt64 {
					return &accessPlan{points: []accessPoint{}}
				}
				lo, bounded = max(lo, v+1), true
			case opcode.GE:
				lo, bounded = max(lo, v), true
			case opcode.LT:
				if v == math.MinInt64 {
					return &accessPlan{points: []accessPoint{}}
				}
				hiv, bounded = min(hiv, v-1), true
			case opcode.LE:
				hiv, bounded = min(hiv, v), true
			}
		}
	}
	if !bounded {
		return nil
	}
	if lo > hiv {
		return &accessPlan{points: []accessPoint{}}
	}
	p := &accessPlan{}
	for _, phys := range ti.PhysicalIDs() {
		start := tablecodec.EncodeIntRecordKey(nil, phys, lo)
		end := tablecodec.PrefixNext(tablecodec.EncodeIntRecordKey(nil, phys, hiv))
		p.ranges = append(p.ranges, keyRange{start: start, end: end})
	}
	return p
}

// eqOf is the value of an equality condition on column id (ok false: none).
func eqOf(f *filter, colID int64) (value.Datum, bool) {
	for i := range f.conds {
		c := &f.conds[i]
		if c.col != nil && c.col.ID == colID && c.kind == condCmp && c.op == opcode.EQ {
			return c.vals[0], true
		}
	}
	return value.Datum{}, false
}

// leadingEq returns the key datums of the leading index columns that have
// an equality condition.
func leadingEq(ti *model.TableInfo, idx *model.IndexInfo, f *filter) ([]value.Datum, []value.Datum, error) {
	var keys, raw []value.Datum
	for _, ic := range idx.Columns {
		col := ti.Columns[ic.Offset]
		d, ok := eqOf(f, col.ID)
		if !ok {
			break
		}
		kd, err := keyDatum(col, d)
		if err != nil {
			return nil, nil, err
		}
		keys, raw = append(keys, kd), append(raw, d)
	}
	return keys, raw, nil
}

func planCommonHandle(ti *model.TableInfo, f *filter) (*accessPlan, error) {
	pk := ti.PrimaryIndex()
	if pk == nil {
		return nil, nil
	}
	keys, raw, err := leadingEq(ti, pk, f)
	if err != nil || len(keys) == 0 {
		return nil, err
	}
	physAll := ti.PhysicalIDs()
	if pc := partitionColumn(ti); pc != nil {
		for i, ic := range pk.Columns[:len(keys)] {
			if ti.Columns[ic.Offset].ID == pc.ID {
				physAll = physFor(ti, pc, raw[i])
			}
		}
	}
	if len(keys) == len(pk.Columns) {
		h, err := tablecodec.CommonHandleFromDatums(keys...)
		if err != nil {
			return nil, err
		}
		return &accessPlan{points: []accessPoint{{phys: physAll, h: h}}}, nil
	}
	p := &accessPlan{}
	for _, phys := range physAll {
		prefix, err := codec.EncodeKey(tablecodec.EncodeRecordPrefix(nil, phys), keys...)
		if err != nil {
			return nil, err
		}
		p.ranges = append(p.ranges, keyRange{start: prefix, end: tablecodec.PrefixNext(prefix)})
	}
	return p, nil
}

// planIndex picks the stored index with the most leading equalities
// (a unique index fully bound first).
func planIndex(ti *model.TableInfo, f *filter) (*accessPlan, error) {
	var best *model.IndexInfo
	var bestKeys, bestRaw []value.Datum
	bestScore := 0
	for _, idx := range storedIndexes(ti) {
		keys, raw, err := leadingEq(ti, idx, f)
		if err != nil {
			return nil, err
		}
		score := 2 * len(keys)
		if idx.Unique && len(keys) == len(idx.Columns) {
			score += 1000
		}
		if len(keys) > 0 && score > bestScore {
			best, bestKeys, bestRaw, bestScore = idx, keys, raw, score
		}
	}
	if best == nil {
		return nil, nil
	}
	physAll := ti.PhysicalIDs()
	if pc := partitionColumn(ti); pc != nil {
		for i, ic := range best.Columns[:len(bestKeys)] {
			if ti.Columns[ic.Offset].ID == pc.ID {
				physAll = physFor(ti, pc, bestRaw[i])
			}
		}
	}
	p := &accessPlan{index: best}
	// Equality on every column of a unique index, none NULL: the one entry
	// that can match is exactly the key (a distinct entry has no handle
	// in its key), so a point get finds it, as TiDB's point-get plan.
	point := best.Unique && len(bestKeys) == len(best.Columns)
	for _, d := range bestKeys {
		point = point && !d.IsNull()
	}
	for _, phys := range physAll {
		prefix, err := codec.EncodeKey(tablecodec.EncodeIndexPrefix(nil, phys, best.ID), bestKeys...)
		if err != nil {
			return nil, err
		}
		// A distinct unique key is exactly prefix; other entries extend it
		// with the handle. Both lie in [prefix, PrefixNext(prefix)).
		p.ranges = append(p.ranges, keyRange{start: prefix, end: tablecodec.PrefixNext(prefix), point: point})
	}
	return p, nil
}

// partitionColumn is the column a partitioned table routes by (nil when
// not partitioned or not found).
func partitionColumn(ti *model.TableInfo) *model.ColumnInfo {
	pi := ti.Partition
	if pi == nil {
		return nil
	}
	if len(pi.Columns) > 0 {
		return ti.ColumnByName(pi.Columns[0].L)
	}
	return ti.ColumnByName(trimQuotes(pi.Expr))
}

// heldRows is how many matching rows forMatches keeps decoded; past it
// only their record keys are kept (in one arena) and each row is read
// again when its turn comes, so a statement over a million rows holds
// keys, not rows, besides the transaction's buffer.
const heldRows = 1024

// forMatches finds every row of ti that f matches (through the cheapest
// access path, before any is written: a statement never sees its own
// changes), then calls fn for each in key order of the path.
func (s *Server) forMatches(txn *fakeupstream.Txn, ti *model.TableInfo, f *filter, fn func(*row) error) error {
	p, err := s.planAccess(ti, f)
	if err != nil {
		return err
	}
	var rows []*row
	var arena []byte
	var ends []int
	var physs []int64
	err = s.eachRow(txn, ti, p, func(r *row) error {
		ok, err := f.match(r)
		if !ok || err != nil {
			return err
		}
		if len(rows) < heldRows {
			rows = append(rows, r)
			return nil
		}
		arena = append(arena, r.key...)
		ends = append(ends, len(arena))
		physs = append(physs, r.physID)
		return nil
	})
	if err != nil {
		return err
	}
	for _, r := range rows {
		if err := fn(r); err != nil {
			return err
		}
	}
	start := 0
	for i, end := range ends {
		key := arena[start:end]
		start = end
		v, err := txn.Get(key)
		if err != nil {
			return err
		}
		if v == nil {
			// An earlier row of this statement cannot have taken it: a
			// key change onto an existing row is a duplicate error.
			return fmt.Errorf("sqlfront: matched row %x of table %q vanished during the statement", key, ti.Name.O)
		}
		r, err := decodeRow(s.m, ti, physs[i], key, v)
		if err != nil {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// matchRows returns the rows of ti visible to txn that f matches, found
// through the cheapest access path.
func (s *Server) matchRows(txn *fakeupstream.Txn, ti *model.TableInfo, f *filter) ([]*row, error) {
	p, err := s.planAccess(ti, f)
	if err != nil {
		return nil, err
	}
	var out []*row
	err = s.eachRow(txn, ti, p, func(r *row) error {
		ok, err := f.match(r)
		if ok {
			out = append(out, r)
		}
		return err
	})
	return out, err
}
