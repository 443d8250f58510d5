// Package schemafence holds the pure ordering rules shared by the adapter and
// the emulator: the DDL fence over the followed table set, the no-skip DDL cursor,
// the same-ts rule, and the applied_ts / safe_ts derivation with monotonicity
// guards.
package schemafence
