package sim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"
)

// SeedResult is one seed's outcome as a worker reports it (one JSON line).
type SeedResult struct {
	Seed     int64
	Hash     string
	Faults   map[Kind]int
	Checks   map[Invariant]int
	Failure  *Violation `json:",omitempty"`
	Schedule string     `json:",omitempty"`
	Shrunk   string     `json:",omitempty"`
	Err      string     `json:",omitempty"`
}

// RunSeed runs one seed and, when it fails, shrinks its fault schedule.
func RunSeed(seed int64, shrinkBudget int) SeedResult {
	cfg := Config{Seed: seed}
	res, err := Run(cfg)
	if err != nil {
		return SeedResult{Seed: seed, Err: err.Error()}
	}
	out := SeedResult{Seed: seed, Hash: res.Hash, Faults: res.Faults, Checks: res.Checks, Failure: res.Failure}
	if res.Failure != nil {
		out.Schedule = res.Schedule.String()
		small, _ := Shrink(cfg, res, shrinkBudget)
		out.Shrunk = small.String()
	}
	return out
}

// Worker runs the seeds first+offset, first+offset+stride, ... below
// first+count and writes one JSON SeedResult per line.
func Worker(out io.Writer, first, count, stride, offset int64, shrinkBudget int) error {
	enc := json.NewEncoder(out)
	for s := first + offset; s < first+count; s += stride {
		if err := enc.Encode(RunSeed(s, shrinkBudget)); err != nil {
			return err
		}
	}
	return nil
}

// WorkerArgs is the worker spec passed to a worker process
// (first:count:stride:offset:shrink).
func WorkerArgs(first, count, stride, offset int64, shrinkBudget int) string {
	return fmt.Sprintf("%d:%d:%d:%d:%d", first, count, stride, offset, shrinkBudget)
}

// ParseWorkerArgs reads WorkerArgs' form.
func ParseWorkerArgs(s string) (first, count, stride, offset int64, shrinkBudget int, err error) {
	_, err = fmt.Sscanf(strings.ReplaceAll(s, ":", " "), "%d %d %d %d %d", &first, &count, &stride, &offset, &shrinkBudget)
	if err == nil && stride <= 0 {
		err = fmt.Errorf("sim: worker stride %d", stride)
	}
	return
}

// Summary aggregates a campaign.
type Summary struct {
	Seeds    int
	Faults   map[Kind]int
	Checks   map[Invariant]int
	Failures []SeedResult
	Elapsed  time.Duration
}

// Campaign runs count seeds from first on `workers` processes (the
// runtime allows one instance per process, M8); spawn returns the
// command of worker i, which must run Worker with WorkerArgs(first,
// count, workers, i, ...) and write its lines to stdout. progress, when
// set, receives a line every `every` seeds.
func Campaign(spawn func(i int) *exec.Cmd, count, workers int, progress io.Writer, every int) (Summary, error) {
	sum := Summary{Faults: map[Kind]int{}, Checks: map[Invariant]int{}}
	start := time.Now()
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for i := 0; i < workers; i++ {
		cmd := spawn(i)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return sum, err
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			return sum, err
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			sc := bufio.NewScanner(stdout)
			sc.Buffer(make([]byte, 1<<20), 16<<20)
			for sc.Scan() {
				var r SeedResult
				if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
					continue // a stray line of the worker's own output
				}
				mu.Lock()
				sum.Seeds++
				for k, n := range r.Faults {
					sum.Faults[k] += n
				}
				for k, n := range r.Checks {
					sum.Checks[k] += n
				}
				if r.Failure != nil || r.Err != "" {
					sum.Failures = append(sum.Failures, r)
				}
				if progress != nil && every > 0 && sum.Seeds%every == 0 {
					fmt.Fprintf(progress, "sim: %d/%d seeds, %d failures, %v\n", sum.Seeds, count, len(sum.Failures), time.Since(start).Round(time.Second))
				}
				mu.Unlock()
			}
			if err := cmd.Wait(); err != nil {
				errs[i] = fmt.Errorf("sim worker %d: %v: %s", i, err, tail(stderr.String(), 2000))
			}
		}(i)
	}
	wg.Wait()
	sum.Elapsed = time.Since(start)
	sort.Slice(sum.Failures, func(i, j int) bool { return sum.Failures[i].Seed < sum.Failures[j].Seed })
	for _, err := range errs {
		if err != nil {
			return sum, err
		}
	}
	if sum.Seeds != count {
		return sum, fmt.Errorf("sim: %d of %d seeds reported", sum.Seeds, count)
	}
	return sum, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// Report renders a summary: seeds, faults by kind, invariants checked,
// failures with their replay lines.
func (s Summary) Report(w io.Writer) {
	fmt.Fprintf(w, "sim: %d seeds in %v, %d failures\n", s.Seeds, s.Elapsed.Round(time.Millisecond), len(s.Failures))
	fmt.Fprintf(w, "faults injected:")
	for _, k := range AllKinds {
		fmt.Fprintf(w, " %s=%d", k, s.Faults[k])
	}
	fmt.Fprintf(w, "\ninvariants checked:")
	for _, inv := range AllInvariants {
		fmt.Fprintf(w, " %s=%d", inv, s.Checks[inv])
	}
	fmt.Fprintln(w)
	for _, f := range s.Failures {
		if f.Err != "" {
			fmt.Fprintf(w, "seed %d: harness error: %s\n", f.Seed, f.Err)
			continue
		}
		fmt.Fprintf(w, "seed %d: %v\n  schedule: %s\n  shrunk:   %s\n  replay:   go test ./sim -run 'TestSim$' -seed %d -faults '%s'\n",
			f.Seed, f.Failure, f.Schedule, f.Shrunk, f.Seed, f.Shrunk)
	}
}
