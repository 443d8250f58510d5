package sim

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

var (
	seedFlag    = flag.Int64("seed", 0, "replay one seed (TestSim)")
	faultFlag   = flag.String("faults", "", "replay this fault schedule instead of the seed's (TestSim)")
	traceFlag   = flag.Bool("simtrace", false, "print the trace (TestSim)")
	seedsFlag   = flag.Int("seeds", defaultSeeds, "seeds of TestSimSeeds")
	firstFlag   = flag.Int64("first", 1, "first seed of TestSimSeeds")
	workersFlag = flag.Int("workers", 2, "worker processes of TestSimSeeds")
)

// workerEnv makes the test binary a campaign worker (Campaign re-executes
// it): the runtime allows one instance per process (M8), so seeds run in
// parallel only as processes.
const workerEnv = "SFEMU_SIM_WORKER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(workerEnv); spec != "" {
		first, count, stride, offset, shrink, err := ParseWorkerArgs(spec)
		if err == nil {
			err = Worker(os.Stdout, first, count, stride, offset, shrink)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	flag.Parse()
	os.Exit(m.Run())
}

// Rules SIM2, SIM7. TestSim runs one seed (-seed N, default 1; -faults replays a shrunk
// schedule) and prints its trace hash: the same seed and schedule print
// the same hash (SIM2). A failure prints the seed, the schedule and the
// smallest schedule that still fails (SIM7).
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
		small, _ := Shrink(cfg, res, 40)
		t.Fatalf("seed %d: %v\nschedule: %s\nshrunk:   %s\nreplay:   go test ./sim -run 'TestSim$' -seed %d -faults '%s'",
			seed, res.Failure, res.Schedule, small, seed, small)
	}
}

// Rules SIM2, SIM3: a seed replays exactly (the same trace hash, run after run);
// another seed gives another trace.
func TestSimReplaysExactly(t *testing.T) {
	for _, seed := range []int64{3, 17} {
		a, err := Run(Config{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		b, err := Run(Config{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		if a.Hash != b.Hash {
			t.Fatalf("seed %d: trace %s, then %s", seed, a.Hash, b.Hash)
		}
		c, err := Run(Config{Seed: seed + 1})
		if err != nil {
			t.Fatal(err)
		}
		if c.Hash == a.Hash {
			t.Fatalf("seeds %d and %d gave the same trace %s", seed, seed+1, a.Hash)
		}
		if a.Mutations == 0 || a.Statements == 0 {
			t.Fatalf("seed %d did nothing: %d statements, %d mutations", seed, a.Statements, a.Mutations)
		}
	}
}

// Rules SIM1, SIM4, SIM5, SIM6, SIM8, SIM9, SIM10-SIM16, SIM17, SIM18: the CI budget, -seeds seeds (default 1,000) on
// -workers processes; every seed must pass every invariant, and the run
// must have injected every fault kind and checked every invariant that a
// clean run can reach.
func TestSimSeeds(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	n, workers := *seedsFlag, max(1, *workersFlag)
	sum, err := Campaign(func(i int) *exec.Cmd {
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), workerEnv+"="+WorkerArgs(*firstFlag, int64(n), int64(workers), int64(i), 40))
		return cmd
	}, n, workers, nil, 0)
	var b strings.Builder
	sum.Report(&b)
	t.Log(b.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Failures) > 0 {
		t.Fatalf("%d of %d seeds failed:\n%s", len(sum.Failures), n, b.String())
	}
	if n >= 200 {
		for _, k := range AllKinds {
			if sum.Faults[k] == 0 {
				t.Errorf("fault kind %s never took effect in %d seeds", k, n)
			}
		}
		for _, inv := range AllInvariants {
			if sum.Checks[inv] == 0 {
				t.Errorf("invariant %s never checked in %d seeds", inv, n)
			}
		}
	}
	t.Logf("GOMAXPROCS %d", runtime.GOMAXPROCS(0))
}

// Rule SIM7: a failing run shrinks to a smaller schedule that still
// breaks the same invariant, and replaying that schedule reproduces the
// shrunk run exactly.
func TestSimShrinks(t *testing.T) {
	for seed := int64(1); seed <= maxSeeds; seed++ {
		cfg := Config{Seed: seed, Mutant: MutantDropRow, MutantOn: FaultLeader}
		res, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if res.Failure == nil || len(res.Schedule) < 3 {
			continue
		}
		small, smallRes := Shrink(cfg, res, 40)
		if len(small) >= len(res.Schedule) || smallRes.Failure == nil || smallRes.Failure.Inv != res.Failure.Inv {
			t.Fatalf("seed %d: schedule of %d faults shrank to %d (%v)", seed, len(res.Schedule), len(small), smallRes.Failure)
		}
		again := cfg
		again.Schedule = small
		replay, err := Run(again)
		if err != nil {
			t.Fatal(err)
		}
		if replay.Hash != smallRes.Hash {
			t.Fatalf("seed %d: shrunk schedule %s replays as %s, shrinking saw %s", seed, small, replay.Hash, smallRes.Hash)
		}
		t.Logf("seed %d: %d faults -> %d (%s)", seed, len(res.Schedule), len(small), small)
		return
	}
	t.Fatalf("no seed up to %d failed with a schedule of 3 faults or more", maxSeeds)
}

// Rule M55 (and SIM2): the seeds kept in testdata/regressions.txt found
// bugs in existing code; each replays its schedule and must pass.
func TestSimRegressions(t *testing.T) {
	b, err := os.ReadFile("testdata/regressions.txt")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			t.Fatalf("regressions.txt:%d: want seed and schedule", i+1)
		}
		seed, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			t.Fatalf("regressions.txt:%d: %v", i+1, err)
		}
		cfg := Config{Seed: seed}
		if f[1] != "-" {
			if cfg.Schedule, err = ParseSchedule(f[1]); err != nil {
				t.Fatalf("regressions.txt:%d: %v", i+1, err)
			}
		}
		res, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if res.Failure != nil {
			t.Errorf("regressions.txt:%d: seed %d (%s): %v", i+1, seed, strings.Join(f[2:], " "), res.Failure)
		}
		n++
	}
	if n == 0 {
		t.Fatal("no regression seeds")
	}
}
