package schemafence

import "fmt"

// DDLReleasable is the same-ts rule as a predicate: a DDL with FinishedTs
// ddlTs may be released for a table only once every DML of that table with
// commit_ts <= ddlTs has been delivered, i.e. the table's DML flush point
// (its resolved ts, or the point up to which its buffered rows were
// flushed) has reached ddlTs. A DML with commit_ts == ddlTs therefore always
// goes first.
func DDLReleasable(ddlTs, dmlFlushedTs uint64) bool { return dmlFlushedTs >= ddlTs }

// SameTsViolation reports a DML that arrived at or below the ts of a DDL
// already released for its table: it should have been delivered before the
// DDL.
type SameTsViolation struct {
	TableID  int64
	CommitTs uint64
	DDLTs    uint64
}

func (e *SameTsViolation) Error() string {
	return fmt.Sprintf("schemafence: table %d DML at commit_ts=%d arrived after DDL at ts=%d was released (same-ts rule: all DML at ts before DDL at ts)",
		e.TableID, e.CommitTs, e.DDLTs)
}

// SameTsGuard detects same-ts rule violations on the receiving side: after
// DDLReleased(table, ts), any DML of that table with commit_ts <= ts is a
// violation. It keeps only the newest released DDL ts per table.
type SameTsGuard struct {
	released map[int64]uint64
}

// NewSameTsGuard returns an empty guard.
func NewSameTsGuard() *SameTsGuard { return &SameTsGuard{released: make(map[int64]uint64)} }

// DDLReleased records that the DDL at ts was released for tableID. A DDL
// older than one already released is a *RegressionError.
func (g *SameTsGuard) DDLReleased(tableID int64, ts uint64) error {
	if old, ok := g.released[tableID]; ok && ts < old {
		return &RegressionError{What: "released ddl ts", Name: fmt.Sprintf("table %d", tableID), Old: old, New: ts}
	}
	g.released[tableID] = ts
	return nil
}

// CheckDML returns a *SameTsViolation when a DML at commitTs for tableID
// comes after a DDL at ts >= commitTs was released for that table.
func (g *SameTsGuard) CheckDML(tableID int64, commitTs uint64) error {
	if ts, ok := g.released[tableID]; ok && commitTs <= ts {
		return &SameTsViolation{TableID: tableID, CommitTs: commitTs, DDLTs: ts}
	}
	return nil
}
