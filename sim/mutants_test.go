package sim

import "testing"

// mutantCase: a deliberate bug, the fault kind that arms it (and the only
// kind the schedule draws), the invariant that must report it ("" = any).
type mutantCase struct {
	name   string
	mutant Mutant
	on     Kind // arms the mutant ("" = from the first step)
	only   Kind // the schedule's only fault kind ("" = mixed)
	want   Invariant
}

// maxSeeds is N: a mutant must be caught within the first N seeds.
const maxSeeds = 12

// Rules SIM20, SIM17, SIM18: every fault kind (the file faults rot and
// torn-write included) has a deliberate bug, armed when a fault
// of that kind begins, that the simulator catches within maxSeeds seeds.
func TestSimCatchesFaultMutants(t *testing.T) {
	cases := []mutantCase{
		{mutant: MutantDropRow, on: FaultSplit},
		{mutant: MutantDropRow, on: FaultMerge},
		{mutant: MutantDropRow, on: FaultLeader},
		{mutant: MutantDropRow, on: FaultStoreDown},
		{mutant: MutantDropRow, on: FaultStreamDrop},
		{mutant: MutantDupRow, on: FaultDuplicate},
		{mutant: MutantDropRow, on: FaultPartial},
		{mutant: MutantDropRow, on: FaultStuckLock},
		{mutant: MutantDropRow, on: FaultStall},
		{mutant: MutantEpochReuse, on: FaultAdapter},
		{mutant: MutantLostAck, on: FaultEmulator},
		{mutant: MutantLostAck, on: FaultCrash},
		{mutant: MutantSwallowError, on: FaultEIO},
		{mutant: MutantSwallowError, on: FaultENOSPC},
		{mutant: MutantRetryTwice, on: FaultSlowDisk},
		{mutant: MutantReseal, on: FaultRot},
		{mutant: MutantMetaFirst, on: FaultTorn},
	}
	covered := map[Kind]bool{}
	for _, c := range cases {
		c.only = c.on
		c.name = string(c.on) + "/" + string(c.mutant)
		covered[c.on] = true
		runMutant(t, c)
	}
	for _, k := range AllKinds {
		if !covered[k] {
			t.Errorf("fault kind %s has no mutant", k)
		}
	}
}

// Rules SIM20, SIM10-SIM16: every invariant has a deliberate bug that it, and not
// another check, reports within maxSeeds seeds.
func TestSimCatchesInvariantMutants(t *testing.T) {
	cases := []mutantCase{
		{mutant: MutantDropRow, want: InvConsistency},
		{mutant: MutantSeqGap, want: InvSeq},
		{mutant: MutantEpochReuse, only: FaultAdapter, want: InvEpoch},
		{mutant: MutantProgressRegress, want: InvMonotonic},
		{mutant: MutantLostAck, want: InvDurability},
		{mutant: MutantLateRow, want: InvLateRows},
		{mutant: MutantAnonymousFatal, only: FaultEIO, want: InvFatal},
		{mutant: MutantReseal, only: FaultRot, want: InvIntegrity},
	}
	covered := map[Invariant]bool{}
	for _, c := range cases {
		c.name = string(c.want) + "/" + string(c.mutant)
		covered[c.want] = true
		runMutant(t, c)
	}
	for _, inv := range AllInvariants {
		if !covered[inv] {
			t.Errorf("invariant %s has no mutant", inv)
		}
	}
}

func runMutant(t *testing.T, c mutantCase) {
	t.Helper()
	for seed := int64(1); seed <= maxSeeds; seed++ {
		res, err := Run(Config{Seed: seed, Mutant: c.mutant, MutantOn: c.on, Only: c.only})
		if err != nil {
			t.Fatalf("%s seed %d: %v", c.name, seed, err)
		}
		if res.Failure == nil || !res.MutantApplied {
			continue
		}
		if c.want != "" && res.Failure.Inv != c.want {
			t.Errorf("%s: seed %d reported %v, want invariant %s", c.name, seed, res.Failure, c.want)
			return
		}
		t.Logf("%s: caught at seed %d: %v", c.name, seed, res.Failure)
		return
	}
	t.Errorf("%s: not caught within %d seeds", c.name, maxSeeds)
}
