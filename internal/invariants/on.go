//go:build invariants

package invariants

const Enabled = true
