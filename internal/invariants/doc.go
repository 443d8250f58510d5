// Package invariants switches on checks that are too costly (or too strict
// about internal state) for production but should run on every operation in
// tests: frontier, reorder, seq-contiguity and watermark monotonicity.
//
// Enabled is a constant, true only when built with `-tags invariants`
// (`make test` runs its -race pass that way). Code guards a check with
//
//	if invariants.Enabled { ... }
//
// so the compiler removes it from normal builds. A failed check panics: it
// reports a bug in this program, never bad input (bad input is an error).
package invariants
