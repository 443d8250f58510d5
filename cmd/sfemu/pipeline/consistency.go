package pipeline

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/searchfabric/sfemu/emulator"
	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/fakeupstream/sqlfront"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// Diff is one difference between an upstream table at a ts and its
// collection.
type Diff struct {
	Table TableRef
	Key   string // the row's "id" column as text, "" for table-level diffs
	What  string
}

func (d Diff) String() string {
	if d.Key == "" {
		return fmt.Sprintf("%s: %s", d.Table, d.What)
	}
	return fmt.Sprintf("%s id=%s: %s", d.Table, d.Key, d.What)
}

// WaitSafe waits until every collection of tables has safe_ts >= ts, or
// timeout passes (then it returns an error naming the lagging collection).
func WaitSafe(ctx context.Context, emu *emulator.Emulator, tables []TableRef, ts uint64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, ref := range tables {
		name := ref.CollectionName()
		for {
			st, err := emu.GetCollection(ctx, &apiv1.GetCollectionRequest{Name: name})
			if err == nil && st.GetSafeTs() >= ts {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("pipeline: collection %q safe_ts %d did not reach %d within %v (last error: %v)",
					name, st.GetSafeTs(), ts, timeout, err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	return nil
}

// CheckConsistency compares each table, read from the upstream by snapshot
// at ts, with its collection's documents: the same set of rows (by the
// table's "id" column), and for every integer and string column the same
// value (a field missing from a document written before an ADD COLUMN
// matches the column's origin default, emulator contract E28). Columns of
// other types (decimal, time, JSON, vector, ...) are
// checked for presence only: their document encodings are the normalize
// bridge's business and have their own tests. The collection must have
// safe_ts >= ts and the upstream no changes after ts.
func CheckConsistency(ctx context.Context, up *Upstream, emu *emulator.Emulator, tables []TableRef, ts uint64) ([]Diff, error) {
	var diffs []Diff
	for _, ref := range tables {
		snap, err := sqlfront.ReadTable(ctx, up.Cluster, ref.DB, ref.Table, ts)
		if err != nil {
			return nil, err
		}
		idOff := -1
		for i, c := range snap.Table.Columns {
			if c.Name.L == "id" {
				idOff = i
			}
		}
		if idOff < 0 {
			return nil, fmt.Errorf("pipeline: table %s has no id column", ref)
		}
		docs, err := scanAll(ctx, emu, ref.CollectionName())
		if err != nil {
			return nil, err
		}
		byID := map[string]*apiv1.Document{}
		for _, d := range docs {
			byID[valueText(d.Fields["id"])] = d
		}
		seen := map[string]bool{}
		for _, row := range snap.Rows {
			id, _ := datumText(row.Values[idOff])
			seen[id] = true
			doc := byID[id]
			if doc == nil {
				diffs = append(diffs, Diff{ref, id, "row missing from the collection"})
				continue
			}
			for i, col := range snap.Table.Columns {
				if col.Hidden || col.State != model.StatePublic {
					continue
				}
				if i >= len(row.Values) {
					continue
				}
				want, comparable := datumText(row.Values[i])
				f, ok := doc.Fields[col.Name.L]
				if !ok {
					// E28: an ADDITIVE schema change keeps documents as
					// stored, so a row untouched since an ADD COLUMN has
					// no field for it while upstream reads the column's
					// origin default (or NULL).
					if comparable && want == originDefaultText(col) {
						continue
					}
					diffs = append(diffs, Diff{ref, id, fmt.Sprintf("field %q missing (upstream %s)", col.Name.L, want)})
					continue
				}
				if !comparable {
					continue
				}
				if got := valueText(f); got != want {
					diffs = append(diffs, Diff{ref, id, fmt.Sprintf("field %q = %s, upstream %s", col.Name.L, got, want)})
				}
			}
		}
		for id := range byID {
			if !seen[id] {
				diffs = append(diffs, Diff{ref, id, "document has no upstream row"})
			}
		}
	}
	sort.Slice(diffs, func(i, j int) bool { return diffs[i].String() < diffs[j].String() })
	return diffs, nil
}

func scanAll(ctx context.Context, emu *emulator.Emulator, coll string) ([]*apiv1.Document, error) {
	var out []*apiv1.Document
	after := ""
	for {
		page, _, err := emu.Scan(ctx, coll, nil, after, 1000)
		if err != nil {
			return nil, fmt.Errorf("pipeline: scanning %q: %w", coll, err)
		}
		out = append(out, page...)
		if len(page) < 1000 {
			return out, nil
		}
		after = page[len(page)-1].PrimaryKey
	}
}

// datumText renders integer and string datums; comparable is false for
// other kinds.
func datumText(d value.Datum) (s string, comparable bool) {
	switch d.Kind() {
	case value.KindNull:
		return "NULL", true
	case value.KindInt64:
		return strconv.FormatInt(d.GetInt64(), 10), true
	case value.KindUint64:
		return strconv.FormatUint(d.GetUint64(), 10), true
	case value.KindString, value.KindBytes:
		return d.GetString(), true
	default:
		return "", false
	}
}

func valueText(v *apiv1.Value) string {
	switch k := v.GetKind().(type) {
	case nil, *apiv1.Value_NullValue:
		return "NULL"
	case *apiv1.Value_Int64Value:
		return strconv.FormatInt(k.Int64Value, 10)
	case *apiv1.Value_Uint64Value:
		return strconv.FormatUint(k.Uint64Value, 10)
	case *apiv1.Value_StringValue:
		return k.StringValue
	case *apiv1.Value_BytesValue:
		return string(k.BytesValue)
	case *apiv1.Value_DoubleValue:
		return strconv.FormatFloat(k.DoubleValue, 'g', -1, 64)
	case *apiv1.Value_BoolValue:
		return strconv.FormatBool(k.BoolValue)
	case *apiv1.Value_JsonValue:
		return k.JsonValue
	default:
		return fmt.Sprintf("%v", v)
	}
}

// originDefaultText renders the value rows written before the column
// existed read as.
func originDefaultText(col *model.ColumnInfo) string {
	if col.OriginDefaultValue == nil {
		return "NULL"
	}
	return fmt.Sprint(col.OriginDefaultValue)
}
