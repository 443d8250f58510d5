// Command simcampaign runs long simulator campaigns (`make sim
// SEEDS=100000`): seeds spread over worker processes (one Mini-CDC runtime
// per process, M8), a progress line every -every seeds, and a summary of
// seeds run, faults injected by kind, invariants checked and failures with
// their shrunk schedules and replay lines (specs/sim.md SIM9).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"

	"github.com/searchfabric/sfemu/sim"
)

func main() {
	seeds := flag.Int("seeds", 10000, "number of seeds")
	first := flag.Int64("first", 1, "first seed")
	workers := flag.Int("workers", runtime.NumCPU(), "worker processes")
	every := flag.Int("every", 500, "print progress every N seeds")
	shrink := flag.Int("shrink", 60, "reruns allowed to shrink a failing schedule")
	worker := flag.String("worker", "", "internal: run as a worker (first:count:stride:offset:shrink)")
	flag.Parse()
	if *worker != "" {
		f, n, stride, off, sb, err := sim.ParseWorkerArgs(*worker)
		if err == nil {
			err = sim.Worker(os.Stdout, f, n, stride, off, sb)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		return
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	w := max(1, *workers)
	sum, err := sim.Campaign(func(i int) *exec.Cmd {
		return exec.Command(exe, "-worker", sim.WorkerArgs(*first, int64(*seeds), int64(w), int64(i), *shrink))
	}, *seeds, w, os.Stdout, *every)
	sum.Report(os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if len(sum.Failures) > 0 {
		os.Exit(1)
	}
}
