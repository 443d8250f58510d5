package storage

import (
	"encoding/binary"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
	"github.com/searchfabric/sfemu/emulator/docstore"
)

// E45: the stored record of a compact row is its header, then each carried
// field's name and value in layout order, exactly what the values encode
// to; loading gives compact rows again, the rows of one shape sharing one
// layout, with the same values; a record naming a field twice is refused.
func TestE45_StoredRecordOfCompactRow(t *testing.T) {
	str := func(s string) *apiv1.Value { return &apiv1.Value{Kind: &apiv1.Value_StringValue{StringValue: s}} }
	num := func(n int64) *apiv1.Value { return &apiv1.Value{Kind: &apiv1.Value_Int64Value{Int64Value: n}} }
	null := &apiv1.Value{Kind: &apiv1.Value_NullValue{NullValue: true}}
	layout := contract.NewLayout([]string{"id", "title", "gone", "n"})
	rows := map[string][]*apiv1.Value{
		"1": {num(1), str("dune"), nil, null},
		"2": {num(2), str("emma"), nil, num(-5)},
	}
	other := contract.NewLayout([]string{"id", "x"})
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *Tx) error {
		for pk, vals := range rows {
			e, err := docstore.NewRowEntry(9, layout, vals, "table:1")
			if err != nil {
				return err
			}
			want := []byte{'R', 9}
			want = binary.AppendUvarint(want, uint64(len("table:1")))
			want = append(want, "table:1"...)
			want = append(want, 3)
			for i, v := range vals {
				if v == nil {
					continue
				}
				want = binary.AppendUvarint(want, uint64(len(layout.Names[i])))
				want = append(want, layout.Names[i]...)
				want, _ = docstore.AppendValue(want, v)
			}
			got, err := EncodeEntry(nil, e)
			if err != nil || string(got) != string(want) {
				t.Fatalf("record of row %s: %x, want %x (%v)", pk, got, want, err)
			}
			if err := tx.PutEntry("books", pk, e); err != nil {
				return err
			}
		}
		e, _ := docstore.NewRowEntry(3, other, []*apiv1.Value{num(3), str("x")}, "table:1")
		return tx.PutEntry("books", "3", e)
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	db, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got := map[string]*docstore.Entry{}
	if _, err := db.Load(func(_, pk string, e *docstore.Entry) error { got[pk] = e; return nil }); err != nil {
		t.Fatal(err)
	}
	if got["1"].Layout == nil || got["1"].Layout != got["2"].Layout || got["3"].Layout == got["1"].Layout {
		t.Fatalf("layouts not shared by shape: %p %p %p", got["1"].Layout, got["2"].Layout, got["3"].Layout)
	}
	for pk, vals := range rows {
		for i, v := range vals {
			if g := got[pk].Field(layout.Names[i]); !proto.Equal(g, v) || (v == nil) != (g == nil) {
				t.Fatalf("row %s field %s: %v, want %v", pk, layout.Names[i], g, v)
			}
		}
	}
	dup := []byte{'R', 1, 0, 2, 1, 'a', docstore.KindNull, 1, 'a', docstore.KindNull}
	if _, err := DecodeEntry(dup); err == nil || !strings.Contains(err.Error(), "duplicate") {
		t.Fatalf("record naming a field twice: %v", err)
	}
}
