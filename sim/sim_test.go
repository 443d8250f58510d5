package sim

import (
	"flag"
	"testing"
	"time"
)

var (
	seedFlag  = flag.Int64("seed", 0, "replay one seed (TestSim)")
	faultFlag = flag.String("faults", "", "replay this fault schedule instead of the seed's (TestSim)")
	quickN    = flag.Int("quick", 30, "seeds of TestSimSeedsQuick")
	traceFlag = flag.Bool("simtrace", false, "print the trace (TestSim)")
)

// TestSim runs one seed (-seed N, default 1) and prints its trace hash:
// the same seed prints the same hash (SIM2).
func TestSim(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = 1
	}
	cfg := Config{Seed: seed, KeepTrace: *traceFlag}
	if *faultFlag != "" {
		s, err := ParseSchedule(*faultFlag)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Schedule = s
	}
	res, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range res.Trace {
		t.Log(l)
	}
	t.Logf("seed %d trace %s faults %v statements %d mutations %d rows %d adapter starts %d", seed, res.Hash, res.Faults, res.Statements, res.Mutations, res.Rows, res.Restarts)
	if res.Failure != nil {
		t.Fatalf("seed %d: %v (schedule %s)", seed, res.Failure, res.Schedule)
	}
}

// TestSimSeedsQuick runs a few seeds (development aid until the budget test).
func TestSimSeedsQuick(t *testing.T) {
	for seed := int64(1); seed <= int64(*quickN); seed++ {
		t0 := time.Now()
		res, err := Run(Config{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%v seed %d hash %s faults %v stmts %d muts %d starts %d", time.Since(t0), seed, res.Hash, res.Faults, res.Statements, res.Mutations, res.Restarts)
		if res.Failure != nil {
			t.Errorf("seed %d: %v (schedule %s)", seed, res.Failure, res.Schedule)
		}
	}
}
