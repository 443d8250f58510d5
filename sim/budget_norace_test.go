//go:build !race

package sim

// defaultSeeds is the CI budget (specs/sim.md SIM8).
const defaultSeeds = 1000
