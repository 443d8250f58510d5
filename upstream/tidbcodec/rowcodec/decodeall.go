package rowcodec

import (
	"encoding/binary"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// DecodeColumns decodes every column of cols into out[i] and records in
// states[i] whether the row stores a value, a NULL, or nothing for it
// (CellAbsent leaves out[i] NULL; the caller fills handle columns and
// defaults). cols must be sorted by ID ascending without duplicates; out and
// states must be at least len(cols) long. The walk checks that the row's
// ids ascend and its offsets do not go backwards.
func (v *RowView) DecodeColumns(cols []Column, out []value.Datum, states []CellState) error {
	return v.DecodeColumnsAt(cols, nil, out, states)
}

// DecodeColumnsAt is DecodeColumns writing the datum of cols[k] to
// out[slots[k]] (states stays indexed by k), so a caller can fill a row in
// its own column order without copying. slots nil means slots[k] = k.
func (v *RowView) DecodeColumnsAt(cols []Column, slots []int, out []value.Datum, states []CellState) error {
	states = states[:len(cols)]
	if slots != nil {
		slots = slots[:len(cols)]
	} else {
		out = out[:len(cols)]
	}
	switch v.format {
	case FormatV2:
		if !v.large {
			return v.decodeColumnsV2Small(cols, slots, out, states)
		}
		return v.decodeColumnsV2(cols, slots, out, states)
	case FormatV1:
		return v.decodeColumnsV1(cols, slots, out, states)
	}
	return headerErr(FormatUnknown, 0, "no row: Reset was not called or failed")
}

func slot(slots []int, k int) int {
	if slots == nil {
		return k
	}
	return slots[k]
}

func (v *RowView) decodeColumnsV2(cols []Column, slots []int, out []value.Datum, states []CellState) error {
	i, nn := 0, v.nNotNull
	j, end := nn, nn+v.nNull
	prevNN, prevNull := int64(-1), int64(-1)
	for k := range cols {
		c := &cols[k]
		id := c.ID
		for i < nn {
			got := v.idAt(i)
			if got <= prevNN {
				return v.unsortedErr(i, got, prevNN)
			}
			if got >= id {
				break
			}
			prevNN = got
			i++
		}
		if i < nn && v.idAt(i) == id {
			cell, off, err := v.cellV2(i, id)
			if err != nil {
				return err
			}
			if err := decodeCellV2Into(&out[slot(slots, k)], cell, c, off); err != nil {
				return err
			}
			states[k] = CellValue
			prevNN = id
			i++
			continue
		}
		for j < end {
			got := v.idAt(j)
			if got <= prevNull {
				return v.unsortedErr(j, got, prevNull)
			}
			if got >= id {
				break
			}
			prevNull = got
			j++
		}
		if j < end && v.idAt(j) == id {
			out[slot(slots, k)], states[k] = value.Datum{}, CellNull
			prevNull = id
			j++
			continue
		}
		out[slot(slots, k)], states[k] = value.Datum{}, CellAbsent
	}
	return nil
}

func (v *RowView) unsortedErr(i int, got, prev int64) error {
	off := headerSize + i
	if v.large {
		off = headerSize + 4*i
	}
	return colErr(FormatV2, got, off, "column ids not strictly ascending: %d after %d", got, prev)
}

func (v *RowView) decodeColumnsV1(cols []Column, slots []int, out []value.Datum, states []CellState) error {
	i := 0
	for k := range cols {
		c := &cols[k]
		for i < len(v.v1) && v.v1[i].id < c.ID {
			i++
		}
		if i < len(v.v1) && v.v1[i].id == c.ID {
			e := &v.v1[i]
			if v.row[e.start] == flagNil {
				out[slot(slots, k)], states[k] = value.Datum{}, CellNull
			} else {
				d, err := decodeDatumV1(v.row[e.start:e.end], c, int(e.start))
				if err != nil {
					return err
				}
				out[slot(slots, k)], states[k] = d, CellValue
			}
			i++
			continue
		}
		out[slot(slots, k)], states[k] = value.Datum{}, CellAbsent
	}
	return nil
}

// decodeColumnsV2Small is the merge walk specialised for the small layout
// (1-byte ids, 2-byte offsets), the layout of nearly every row.
func (v *RowView) decodeColumnsV2Small(cols []Column, slots []int, out []value.Datum, states []CellState) error {
	row := v.row
	nn := v.nNotNull
	ids := row[headerSize : headerSize+nn]
	nullIDs := row[headerSize+nn : headerSize+nn+v.nNull]
	if err := checkAscending(ids, headerSize); err != nil {
		return err
	}
	if err := checkAscending(nullIDs, headerSize+nn); err != nil {
		return err
	}
	offs := row[v.offsOff : v.offsOff+2*nn]
	data := row[v.dataOff:v.dataEnd]
	i, j := 0, 0
	for k := range cols {
		c := &cols[k]
		if uint64(c.ID) > 255 {
			out[slot(slots, k)], states[k] = value.Datum{}, CellAbsent
			continue
		}
		b := byte(c.ID)
		for i < len(ids) && ids[i] < b {
			i++
		}
		if i < len(ids) && ids[i] == b {
			start := 0
			if i > 0 {
				start = int(binary.LittleEndian.Uint16(offs[2*i-2:]))
			}
			end := int(binary.LittleEndian.Uint16(offs[2*i:]))
			if start > end || end > len(data) {
				return colErr(FormatV2, c.ID, v.dataOff+start,
					"cell spans data offsets [%d, %d) outside the %d-byte data area", start, end, len(data))
			}
			if err := decodeCellV2Into(&out[slot(slots, k)], data[start:end], c, v.dataOff+start); err != nil {
				return err
			}
			states[k] = CellValue
			i++
			continue
		}
		for j < len(nullIDs) && nullIDs[j] < b {
			j++
		}
		if j < len(nullIDs) && nullIDs[j] == b {
			out[slot(slots, k)], states[k] = value.Datum{}, CellNull
			j++
			continue
		}
		out[slot(slots, k)], states[k] = value.Datum{}, CellAbsent
	}
	return nil
}

// checkAscending verifies 1-byte ids are strictly ascending; base is the
// offset of ids[0] in the row.
func checkAscending(ids []byte, base int) error {
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			return colErr(FormatV2, int64(ids[i]), base+i, "column ids not strictly ascending: %d after %d", ids[i], ids[i-1])
		}
	}
	return nil
}
