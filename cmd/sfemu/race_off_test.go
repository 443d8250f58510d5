//go:build !race

package main

// raceBuilt: this test binary has the race detector (make test's second pass).
const raceBuilt = false
