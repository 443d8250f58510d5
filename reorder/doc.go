// Package reorder holds one bounded, seal-driven reorder buffer per source
// partition: rows are released only when a checkpoint or DDL seals them, in
// (commit_ts, arrival ordinal) order.
package reorder
