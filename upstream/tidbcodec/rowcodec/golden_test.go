package rowcodec

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/types"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value/golden"
)

const goldenFile = "golden/tidb-golden.jsonl"

type goldenColumn struct {
	ColID     int64           `json:"col_id"`
	ColName   string          `json:"col_name"`
	FieldType types.FieldType `json:"field_type"`
	Text      *string         `json:"text"`
	Skipped   bool            `json:"skipped_by_table_layer"`
	Packed    string          `json:"packed_uint"`
	TimeType  string          `json:"time_type"`
	Float64   string          `json:"float64_bits"`
}

type goldenRow struct {
	Name              string         `json:"name"`
	Loc               string         `json:"loc"`
	ColIDs            []int64        `json:"col_ids"`
	Columns           []goldenColumn `json:"columns"`
	Written           []int64        `json:"written_col_ids"`
	Handle            string         `json:"handle"`
	HandleEncodedHex  string         `json:"handle_encoded_hex"`
	KeyHex            string         `json:"key_hex"`
	V2Hex             string         `json:"value_v2_hex"`
	V2AllHex          string         `json:"value_v2_all_columns_hex"`
	V2ChecksumHex     string         `json:"value_v2_checksum_hex"`
	V1Hex             string         `json:"value_v1_hex"`
	V1AllHex          string         `json:"value_v1_all_columns_hex"`
	HandleKind        string         `json:"handle_kind"`
	ValueNote         string         `json:"value_note"`
	ChecksumNote      string         `json:"value_v2_checksum_note"`
	TableID           int64          `json:"table_id"`
	ComparableKeyHex  string         `json:"comparable_key_hex"`
	RowLabel          string         `json:"row"`
	Table             string         `json:"table"`
	LocNote           string         `json:"loc_note"`
	Kind              string         `json:"kind"`
	SkippedColumnNote string         `json:"-"`
}

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

func goldenRecords(tb testing.TB) []golden.Record {
	return golden.OfKind(tb, goldenFile, "row")
}

func loadGoldenRows(t *testing.T) []goldenRow {
	var rows []goldenRow
	for _, r := range goldenRecords(t) {
		var g goldenRow
		r.Decode(t, &g)
		rows = append(rows, g)
	}
	return rows
}

// encodedHandle is what checksum version 2 continues over.
func (g *goldenRow) encodedHandle(t *testing.T) []byte {
	if g.HandleKind == "common" {
		return unhex(t, g.HandleEncodedHex)
	}
	h, err := strconv.ParseInt(g.Handle, 10, 64)
	if err != nil {
		t.Fatalf("%s: handle %q: %v", g.Name, g.Handle, err)
	}
	return binary.BigEndian.AppendUint64(nil, uint64(h)^(1<<63))
}

// expectText is the text a decoded datum must render as. TIMESTAMP texts in
// the golden file are in the row's loc, the stored value is UTC.
func expectText(t *testing.T, g *goldenRow, c *goldenColumn, d value.Datum) (got, want string) {
	want = "NULL"
	if c.Text != nil {
		want = *c.Text
	}
	got = d.String()
	switch d.Kind() {
	case value.KindBit:
		// The golden text of a BIT datum is its unsigned value.
		return strconv.FormatUint(d.GetUint64(), 10), want
	case value.KindFloat32, value.KindFloat64:
		// Floats are pinned by their float64 bits (the golden text is Go's
		// %g, not the SQL text form).
		return fmt.Sprintf("%016x", math.Float64bits(d.GetFloat64())), c.Float64
	}
	if d.Kind() == value.KindTime && c.FieldType.GetType() == mysql.TypeTimestamp && g.Loc != "UTC" {
		loc, err := time.LoadLocation(g.Loc)
		if err != nil {
			t.Fatalf("load %s: %v", g.Loc, err)
		}
		gt, err := d.GetTime().GoTime(time.UTC)
		if err != nil {
			t.Fatalf("%s: %v", g.Name, err)
		}
		local := value.TimeFromGo(gt.In(loc), mysql.TypeTimestamp, d.Fsp())
		got = local.String()
	}
	return got, want
}

// Rule R1, R4-R9: every golden row decodes, in every stored variant, to the
// values TiDB was given; absent columns are exactly the ones TiDB skipped.
func TestGoldenRowsDecode(t *testing.T) {
	rows := loadGoldenRows(t)
	if len(rows) < 12 {
		t.Fatalf("expected at least 12 golden rows, found %d", len(rows))
	}
	for _, g := range rows {
		cols := make([]Column, len(g.Columns))
		for i := range g.Columns {
			cols[i] = NewColumn(g.Columns[i].ColID, &g.Columns[i].FieldType)
		}
		variants := []struct {
			name    string
			hex     string
			all     bool
			format  Format
			checked bool
		}{
			{"v2", g.V2Hex, false, FormatV2, false},
			{"v2_all", g.V2AllHex, true, FormatV2, false},
			{"v2_checksum", g.V2ChecksumHex, false, FormatV2, true},
			{"v1", g.V1Hex, false, FormatV1, false},
			{"v1_all", g.V1AllHex, true, FormatV1, false},
		}
		for _, vr := range variants {
			t.Run(g.Name+"/"+vr.name, func(t *testing.T) {
				row := unhex(t, vr.hex)
				var v RowView
				if err := v.Reset(row); err != nil {
					t.Fatalf("Reset: %v", err)
				}
				if v.Format() != vr.format {
					t.Fatalf("format %v, want %v", v.Format(), vr.format)
				}
				if vr.checked {
					ct, ok := v.Checksum()
					if !ok || ct.Version != 2 {
						t.Fatalf("checksum tail %+v ok=%v, want version 2", ct, ok)
					}
					if err := v.VerifyChecksum(g.encodedHandle(t)); err != nil {
						t.Fatalf("VerifyChecksum: %v", err)
					}
					bad := slices.Clone(g.encodedHandle(t))
					bad[len(bad)-1] ^= 1
					if err := v.VerifyChecksum(bad); err == nil {
						t.Fatalf("VerifyChecksum accepted a different handle")
					}
				}
				// Lazy per-column access.
				for i := range g.Columns {
					gc := &g.Columns[i]
					d, found, err := v.Column(&cols[i])
					if err != nil {
						t.Fatalf("column %d (%s): %v", gc.ColID, gc.ColName, err)
					}
					written := vr.all || g.Written != nil && slices.Contains(g.Written, gc.ColID)
					if found != written {
						t.Fatalf("column %d (%s): found=%v, TiDB wrote it: %v", gc.ColID, gc.ColName, found, written)
					}
					if !found {
						// Skipped: a NULL with NULL default, or a handle column.
						if gc.Text != nil && !gc.Skipped {
							t.Fatalf("column %d (%s) absent but has value %q and was not skipped", gc.ColID, gc.ColName, *gc.Text)
						}
						continue
					}
					got, want := expectText(t, &g, gc, d)
					if got != want {
						t.Errorf("column %d (%s): got %q, want %q", gc.ColID, gc.ColName, got, want)
					}
					// The golden packed form is the local time; TIMESTAMP
					// is stored in UTC (checked through the text above).
					utcEqualsLocal := g.Loc == "UTC" || gc.FieldType.GetType() != mysql.TypeTimestamp
					if gc.Packed != "" && utcEqualsLocal && d.GetUint64() != mustUint(t, gc.Packed) {
						t.Errorf("column %d (%s): packed %d, want %s", gc.ColID, gc.ColName, d.GetUint64(), gc.Packed)
					}
				}
				// Full decode agrees with lazy access.
				sorted, perm := sortedColumns(cols)
				out := make([]value.Datum, len(sorted))
				states := make([]CellState, len(sorted))
				if err := v.DecodeColumns(sorted, out, states); err != nil {
					t.Fatalf("DecodeColumns: %v", err)
				}
				for k := range sorted {
					d, found, _ := v.Column(&cols[perm[k]])
					if found != (states[k] != CellAbsent) || !d.Equal(&out[k]) {
						t.Fatalf("column %d: DecodeColumns %v/%v, Column %v/%v", sorted[k].ID, out[k], states[k], d, found)
					}
				}
				// The slotted walk writes each datum at its schema position.
				byPos := make([]value.Datum, len(cols))
				if err := v.DecodeColumnsAt(sorted, perm, byPos, states); err != nil {
					t.Fatalf("DecodeColumnsAt: %v", err)
				}
				for k := range sorted {
					if !byPos[perm[k]].Equal(&out[k]) {
						t.Fatalf("column %d: DecodeColumnsAt %v, DecodeColumns %v", sorted[k].ID, byPos[perm[k]], out[k])
					}
				}
			})
		}
	}
}

func mustUint(t *testing.T, s string) uint64 {
	u, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return u
}

// sortedColumns returns cols sorted by id and, for each sorted position, the
// index in cols.
func sortedColumns(cols []Column) ([]Column, []int) {
	perm := make([]int, len(cols))
	for i := range perm {
		perm[i] = i
	}
	slices.SortFunc(perm, func(a, b int) int { return int(cols[a].ID - cols[b].ID) })
	out := make([]Column, len(cols))
	for k, i := range perm {
		out[k] = cols[i]
	}
	return out, perm
}

// Rules R10-R13: the encoders reproduce TiDB's bytes exactly, for the
// skipping writer's column set and for every column, with and without the
// checksum tail, in both formats.
func TestGoldenRowsEncode(t *testing.T) {
	for _, g := range loadGoldenRows(t) {
		t.Run(g.Name, func(t *testing.T) {
			cols := make([]Column, len(g.Columns))
			for i := range g.Columns {
				cols[i] = NewColumn(g.Columns[i].ColID, &g.Columns[i].FieldType)
			}
			// Datums from the all-columns v2 row (every column present).
			var v RowView
			if err := v.Reset(unhex(t, g.V2AllHex)); err != nil {
				t.Fatal(err)
			}
			all := make([]value.Datum, len(cols))
			for i := range cols {
				d, found, err := v.Column(&cols[i])
				if err != nil || !found {
					t.Fatalf("column %d: found=%v err=%v", cols[i].ID, found, err)
				}
				all[i] = d
			}
			var writtenIDs []int64
			var written []value.Datum
			for i := range cols {
				if slices.Contains(g.Written, cols[i].ID) {
					writtenIDs = append(writtenIDs, cols[i].ID)
					written = append(written, all[i])
				}
			}
			ids := g.ColIDs
			var enc Encoder
			check := func(what string, got []byte, err error, wantHex string) {
				t.Helper()
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if want := unhex(t, wantHex); !bytes.Equal(got, want) {
					t.Fatalf("%s:\n got %x\nwant %x", what, got, want)
				}
			}
			got, err := enc.EncodeV2(nil, ids, all, nil)
			check("v2 all columns", got, err, g.V2AllHex)
			got, err = enc.EncodeV2(nil, writtenIDs, written, nil)
			check("v2", got, err, g.V2Hex)
			got, err = enc.EncodeV2(nil, writtenIDs, written, &Checksum{Version: 2, Data: g.encodedHandle(t)})
			check("v2 checksum", got, err, g.V2ChecksumHex)
			got, err = EncodeV1(nil, ids, all)
			check("v1 all columns", got, err, g.V1AllHex)
			got, err = EncodeV1(nil, writtenIDs, written)
			check("v1", got, err, g.V1Hex)
		})
	}
}
