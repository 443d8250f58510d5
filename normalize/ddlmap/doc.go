// Package ddlmap maps the runtime's DDL events to the emulator's schema
// requests (specs/normalization.md N16-N19, N25-N27, N34): which
// collections a DDL affects, which partitions it removes and adds, the
// post-DDL collection definition and its update policy, and the complete
// PutCollectionSchemaRequest. It is pure: a function of the DDL and a
// snapshot of the collection's lineage, no I/O and no state of its own, so
// the same DDL and lineage always give a byte-identical request (N28).
// The normalize bridge owns the lineage and sends the requests.
package ddlmap
