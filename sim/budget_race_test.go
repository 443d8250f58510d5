//go:build race

package sim

// defaultSeeds under -race: the race detector makes every seed about ten
// times slower; the race pass checks the harness's goroutines, not the
// seed space (specs/sim.md SIM8).
const defaultSeeds = 16
