package schemastore

import "math"

// Stats is what the store holds, for metrics (specs/sfemu-run.md SR12):
// read under the lookup lock, so it never waits for an ingestion longer
// than one apply.
type Stats struct {
	// SchemaVersion is the SchemaVersion of the last applied DDL job (0
	// while none was applied since the initial snapshot).
	SchemaVersion int64
	// LastDDLTs is that job's commit ts (where it entered the history).
	LastDDLTs uint64
	// TableVersions counts the table versions held over every physical
	// table (what GC trims); Tables the live logical tables.
	TableVersions, Tables int
	// Events is the number of DDL events held for the fetch APIs.
	Events int
	// ResolvedTs and GCTs bound the ts lookups accept.
	ResolvedTs, GCTs uint64
}

// Stats returns the store's figures (zero before RegisterKeyspace).
func (s *Store) Stats() Stats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	h := s.h
	if h == nil {
		return Stats{}
	}
	st := Stats{Tables: len(h.tables), Events: len(h.events), ResolvedTs: h.resolvedTs, GCTs: h.gcTs}
	if h.last.ver != math.MaxInt64 { // the snapshot's mark: no job applied yet
		st.SchemaVersion, st.LastDDLTs = h.last.ver, h.last.ts
	}
	for _, p := range h.physical {
		st.TableVersions += len(p.versions)
	}
	return st
}
