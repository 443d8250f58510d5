// Package rowcodec reads and writes the row values TiDB stores under record
// keys: row format v2 (small and large layouts, NULL column lists, the
// optional checksum tail) and the old v1 format (datum-encoded id/value
// pairs). The first byte tells them apart: 0x80 is v2, anything else v1.
//
// Reading is lazy. A RowView parses only the header of a value it borrows;
// a column is located by binary search over the stored ids and decoded on
// access into a value.Datum, using a Column built once from the column's
// FieldType. Fixed-size kinds decode without allocating; variable-size
// payloads (strings, decimal bin, JSON, vectors) are borrowed from the row
// bytes, so a Datum is valid only as long as those bytes are.
//
// Writing (EncodeV2, EncodeV1) produces exactly the bytes TiDB's own encoder
// writes for the same column ids and datums, so the fake upstream stores what
// a real cluster would.
//
// Every decoder returns a *DecodeError naming the format, the column id (when
// one is involved) and the byte offset in the row value; none panics on any
// input. The rules are in specs/rowcodec.md (R1-R16).
package rowcodec
