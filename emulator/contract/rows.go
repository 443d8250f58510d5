package contract

import (
	"fmt"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
)

// RowSchema is a Schema bound to a row layout (field names by position):
// the checks of CheckMutation (E36, E42) for an upsert whose values come
// positionally (E44) instead of in the Mutation's fields map, with the
// name-to-field resolution done once per layout instead of once per field
// of every row.
type RowSchema struct {
	s      *Schema
	names  []string
	fields []*apiv1.Field // by position; nil = not in the definition
	pk     []int          // position of each key field (key order), -1 = absent
}

// Bind resolves names (a layout: distinct field names) against the
// schema.
func (s *Schema) Bind(names []string) *RowSchema {
	rs := &RowSchema{s: s, names: names, fields: make([]*apiv1.Field, len(names)), pk: make([]int, len(s.PK))}
	pos := make(map[string]int, len(names))
	for i, n := range names {
		rs.fields[i] = s.Fields[n]
		pos[n] = i
	}
	for i, f := range s.PK {
		rs.pk[i] = -1
		if p, ok := pos[f.GetName()]; ok {
			rs.pk[i] = p
		}
	}
	return rs
}

// CheckRowAt is CheckMutationAt of mutations[i] whose field values are
// vals (vals[j] is the value of names[j], nil = not carried; nil vals for
// a delete). The mutation's own fields map must be empty: a row carries
// its values one way only.
func (rs *RowSchema) CheckRowAt(m *apiv1.Mutation, vals []*apiv1.Value, i int) error {
	err := rs.checkRow(m, vals)
	if ce, ok := err.(*Error); ok {
		ce.Field = "mutations[" + fmt.Sprint(i) + "]" + ce.Field
	}
	return err
}

func (rs *RowSchema) checkRow(m *apiv1.Mutation, vals []*apiv1.Value) error {
	s := rs.s
	if len(m.GetFields()) != 0 {
		return Errf(ReasonInvalidMutation, ".fields", "no fields (the values travel positionally)", fmt.Sprintf("%d fields", len(m.GetFields())), "a row carries its values one way only")
	}
	if done, err := s.checkHead(m, ""); done || err != nil {
		return err
	}
	if len(vals) != len(rs.names) {
		return Errf(ReasonInvalidMutation, ".fields", fmt.Sprintf("%d positional values", len(rs.names)), fmt.Sprint(len(vals)), "the row does not match its layout")
	}
	for j, v := range vals {
		if v == nil {
			continue
		}
		if err := s.checkField(rs.fields[j], rs.names[j], v, ""); err != nil {
			return err
		}
	}
	if len(rs.pk) == 1 && rs.pk[0] >= 0 && singleKeyMatches(vals[rs.pk[0]], m.GetPrimaryKey()) {
		return nil // the common case, checked without rendering the key
	}
	return s.checkKey(m.GetPrimaryKey(), "", func(i int, _ *apiv1.Field) (*apiv1.Value, bool) {
		if p := rs.pk[i]; p >= 0 && vals[p] != nil {
			return vals[p], true
		}
		return nil, false
	})
}

// Layout names the fields of positional rows. One layout is shared by
// every row of one table shape, so a row pays for its values only.
type Layout struct {
	Names []string
	index map[string]int
}

// NewLayout returns the layout of names (distinct; the caller checks).
func NewLayout(names []string) *Layout {
	l := &Layout{Names: append([]string(nil), names...), index: make(map[string]int, len(names))}
	for i, n := range l.Names {
		l.index[n] = i
	}
	return l
}

// Index is the position of name, -1 when the layout has no such field.
func (l *Layout) Index(name string) int {
	if i, ok := l.index[name]; ok {
		return i
	}
	return -1
}

// Rows carries the field values of a MutationBatch's upserts by position
// (E44): Vals[i] holds the values of Mutations[i] in Layout order (nil
// for a delete), and the mutations' own fields maps are empty. The
// in-process adapter builds batches this way; the API edge (gRPC, HTTP)
// keeps the canonical map form.
//
// Enc is the encoded form of the same rows (E96), used instead of Vals
// (one of the two is nil): Enc[i] is mutations[i]'s row as the emulator
// keeps it in memory (E45), each layout slot encoded by the docstore
// package's value encoders (docstore.AppendInt64, ... AppendAbsent; nil
// for a delete). The emulator checks the bytes, runs the per-field checks
// on the values they hold and keeps each admitted row as it is.
type Rows struct {
	Layout *Layout
	Vals   [][]*apiv1.Value
	Enc    [][]byte
}

// Len is the number of rows, in whichever form they travel.
func (r *Rows) Len() int {
	if r.Enc != nil {
		return len(r.Enc)
	}
	return len(r.Vals)
}
