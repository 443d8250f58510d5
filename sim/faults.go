package sim

import (
	"fmt"
	"math/rand"
	"sort"
	"strconv"
	"strings"
)

// Kind is a fault kind (specs/sim.md SIM5).
type Kind string

// The fault kinds. Upstream faults act on the fake cluster and its feed;
// process faults stop the adapter or the emulator; storage faults act at
// the emulator's write boundary (the next write after the fault's step).
const (
	FaultSplit      Kind = "split"        // split a region inside a table
	FaultMerge      Kind = "merge"        // merge two neighbour regions
	FaultLeader     Kind = "leader"       // move a region's leader
	FaultStoreDown  Kind = "store-down"   // a store goes down for a while, then up
	FaultStreamDrop Kind = "stream-reset" // the feed drops a store's streams
	FaultDuplicate  Kind = "duplicate"    // the feed re-sends a region's recent window
	FaultPartial    Kind = "partial"      // only some of the ready events are delivered before time moves (reordering across regions)
	FaultStuckLock  Kind = "stuck-lock"   // an abandoned prewrite holds a table's resolved ts until resolved
	FaultStall      Kind = "stall"        // a region's resolved ts is held back for a while
	FaultAdapter    Kind = "adapter-restart"
	FaultEmulator   Kind = "emulator-restart"
	FaultCrash      Kind = "crash"  // the process dies at the next storage write (before or after it is durable)
	FaultEIO        Kind = "eio"    // the next storage write fails with EIO
	FaultENOSPC     Kind = "enospc" // the next storage write fails with ENOSPC
	FaultSlowDisk   Kind = "slow-disk"
	// Faults of sfemu's files (SIM17, SIM18), drawn from a stream of
	// their own so that adding them left every other seed's schedule as
	// it was.
	FaultRot  Kind = "rot"        // a stopped sfemu's store file is damaged at rest
	FaultTorn Kind = "torn-write" // the process dies at the next storage write, which the disk keeps in part
)

// AllKinds lists every fault kind in a fixed order.
var AllKinds = []Kind{FaultSplit, FaultMerge, FaultLeader, FaultStoreDown, FaultStreamDrop, FaultDuplicate, FaultPartial,
	FaultStuckLock, FaultStall, FaultAdapter, FaultEmulator, FaultCrash, FaultEIO, FaultENOSPC, FaultSlowDisk, FaultRot, FaultTorn}

// weights is how often each kind is drawn.
var weights = map[Kind]int{
	FaultSplit: 4, FaultMerge: 3, FaultLeader: 4, FaultStoreDown: 2, FaultStreamDrop: 3, FaultDuplicate: 3, FaultPartial: 4,
	FaultStuckLock: 2, FaultStall: 3, FaultAdapter: 1, FaultEmulator: 1, FaultCrash: 2, FaultEIO: 1, FaultENOSPC: 1, FaultSlowDisk: 2,
}

// Fault is one scheduled fault: at workload step Step, kind Kind with Arg
// deciding its details (which region, store, duration...). Arg is drawn
// when the schedule is made, so removing another fault (shrinking) does
// not change what this one does.
type Fault struct {
	Step int
	Kind Kind
	Arg  uint64
}

func (f Fault) String() string { return fmt.Sprintf("%d:%s:%d", f.Step, f.Kind, f.Arg) }

// Schedule is a run's faults in step order.
type Schedule []Fault

func (s Schedule) String() string {
	parts := make([]string, len(s))
	for i, f := range s {
		parts[i] = f.String()
	}
	return strings.Join(parts, ",")
}

// Counts is the number of faults per kind.
func (s Schedule) Counts() map[Kind]int {
	out := map[Kind]int{}
	for _, f := range s {
		out[f.Kind]++
	}
	return out
}

// ParseSchedule reads Schedule.String's form ("" is the empty schedule).
func ParseSchedule(text string) (Schedule, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return Schedule{}, nil
	}
	known := map[Kind]bool{}
	for _, k := range AllKinds {
		known[k] = true
	}
	var out Schedule
	for _, part := range strings.Split(text, ",") {
		f := strings.Split(part, ":")
		if len(f) != 3 {
			return nil, fmt.Errorf("sim: fault %q: want step:kind:arg", part)
		}
		step, err := strconv.Atoi(f[0])
		if err != nil {
			return nil, fmt.Errorf("sim: fault %q: step: %v", part, err)
		}
		if !known[Kind(f[1])] {
			return nil, fmt.Errorf("sim: fault %q: unknown kind %q", part, f[1])
		}
		arg, err := strconv.ParseUint(f[2], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("sim: fault %q: arg: %v", part, err)
		}
		out = append(out, Fault{Step: step, Kind: Kind(f[1]), Arg: arg})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Step < out[j].Step })
	return out, nil
}

// fileKinds are the kinds drawn by fileFaults, not by weight.
var fileKinds = map[Kind]bool{FaultRot: true, FaultTorn: true}

// makeSchedule draws a run's faults: the upstream, process and write
// boundary faults from rng, between zero and a few per ten steps, kinds
// by weight; the file faults from files (fileFaults).
func makeSchedule(rng, files *rand.Rand, steps int, only Kind) Schedule {
	out := drawSchedule(rng, steps, only)
	if only == "" {
		out = append(out, fileFaults(files, steps)...)
		sort.SliceStable(out, func(i, j int) bool { return out[i].Step < out[j].Step })
	}
	return out
}

// fileFaults draws, for about one seed in three each, one at-rest damage
// and one torn write.
func fileFaults(rng *rand.Rand, steps int) Schedule {
	var out Schedule
	for _, k := range []Kind{FaultRot, FaultTorn} {
		step, arg := rng.Intn(steps), rng.Uint64()
		if rng.Intn(3) == 0 {
			out = append(out, Fault{Step: step, Kind: k, Arg: arg})
		}
	}
	return out
}

func drawSchedule(rng *rand.Rand, steps int, only Kind) Schedule {
	total := 0
	for _, k := range AllKinds {
		total += weights[k] // 0 for the file kinds
	}
	var out Schedule
	n := rng.Intn(steps/4 + 2)
	for i := 0; i < n; i++ {
		step := rng.Intn(steps)
		pick := rng.Intn(total)
		var kind Kind
		for _, k := range AllKinds {
			if pick < weights[k] {
				kind = k
				break
			}
			pick -= weights[k]
		}
		arg := rng.Uint64()
		if only != "" {
			kind = only
		}
		out = append(out, Fault{Step: step, Kind: kind, Arg: arg})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Step < out[j].Step })
	return out
}
