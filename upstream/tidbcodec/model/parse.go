package model

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ParseError says which object failed to parse, where, and why. JobID is set
// when the job's id could be read from the input (0 otherwise).
type ParseError struct {
	// What is "job", "table info" or "db info".
	What  string
	JobID int64
	// Offset is the byte offset in the input where parsing failed, or -1.
	Offset int64
	// Field is the JSON path of a mistyped field ("binlog.TableInfo.cols"), if known.
	Field string
	Err   error
}

func (e *ParseError) Error() string {
	s := "model: parse " + e.What
	if e.JobID != 0 {
		s += fmt.Sprintf(" (job id %d)", e.JobID)
	}
	if e.Offset >= 0 {
		s += fmt.Sprintf(" at byte %d", e.Offset)
	}
	if e.Field != "" {
		s += fmt.Sprintf(" field %q", e.Field)
	}
	return s + ": " + e.Err.Error()
}

func (e *ParseError) Unwrap() error { return e.Err }

func newParseError(what string, data []byte, err error) *ParseError {
	pe := &ParseError{What: what, Offset: -1, Err: err}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		pe.Offset = se.Offset
	case errors.As(err, &te):
		pe.Offset = te.Offset
		pe.Field = te.Field
		pe.Err = fmt.Errorf("JSON %s is not a valid %s", te.Value, te.Type)
	}
	if len(data) == 0 {
		pe.Err = errors.New("empty input")
		pe.Offset = 0
	}
	return pe
}

// ParseTableInfo parses a TableInfo (a `Table:<id>` meta value). Unknown
// fields are ignored; the input is kept in Raw.
func ParseTableInfo(data []byte) (*TableInfo, error) {
	t := new(TableInfo)
	// Decode through the alias type: going through UnmarshalJSON would make
	// encoding/json scan the input twice.
	if err := json.Unmarshal(data, (*tableInfoJSON)(t)); err != nil {
		return nil, newParseError("table info", data, err)
	}
	if err := t.checkShape(); err != nil {
		return nil, newParseError("table info", data, err)
	}
	t.Raw = cloneBytes(data)
	return t, nil
}

// ParseDBInfo parses a DBInfo (a `DB:<id>` field of the `DBs` hash).
func ParseDBInfo(data []byte) (*DBInfo, error) {
	d := new(DBInfo)
	if err := json.Unmarshal(data, d); err != nil {
		return nil, newParseError("db info", data, err)
	}
	return d, nil
}

// ParseJob parses a DDL job's JSON (`job_meta`). On failure the error names
// the job id when the input has a readable top-level "id".
func ParseJob(data []byte) (*Job, error) {
	j := new(Job)
	if err := json.Unmarshal(data, j); err != nil {
		pe := newParseError("job", data, err)
		var probe struct {
			ID json.RawMessage `json:"id"`
		}
		// Best effort: a syntactically valid document with a mistyped
		// field still tells us which job it is.
		if json.Unmarshal(data, &probe) == nil {
			var id int64
			if json.Unmarshal(probe.ID, &id) == nil {
				pe.JobID = id
			}
		}
		return nil, pe
	}
	return j, nil
}

type tableInfoJSON TableInfo

// UnmarshalJSON decodes TiDB's JSON and keeps a copy of it in Raw.
func (t *TableInfo) UnmarshalJSON(data []byte) error {
	// Reset derived state: the column index describes the old columns.
	t.colIndex = nil
	if err := json.Unmarshal(data, (*tableInfoJSON)(t)); err != nil {
		return err
	}
	if err := t.checkShape(); err != nil {
		return err
	}
	t.Raw = cloneBytes(data)
	return nil
}

// checkShape rejects null entries in lists TiDB never writes nulls into, so
// the helpers and every consumer can index them without nil checks.
func (t *TableInfo) checkShape() error {
	for i, c := range t.Columns {
		if c == nil {
			return fmt.Errorf("table %d: cols[%d] is null", t.ID, i)
		}
	}
	for i, idx := range t.Indices {
		if idx == nil {
			return fmt.Errorf("table %d: index_info[%d] is null", t.ID, i)
		}
		for k, c := range idx.Columns {
			if c == nil {
				return fmt.Errorf("table %d: index_info[%d].idx_cols[%d] is null", t.ID, i, k)
			}
		}
	}
	return nil
}

type dbInfoJSON DBInfo

// UnmarshalJSON decodes TiDB's JSON and keeps a copy of it in Raw.
func (d *DBInfo) UnmarshalJSON(data []byte) error {
	if err := json.Unmarshal(data, (*dbInfoJSON)(d)); err != nil {
		return err
	}
	d.Raw = cloneBytes(data)
	return nil
}
