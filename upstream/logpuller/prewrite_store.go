package logpuller

import (
	"fmt"

	"github.com/searchfabric/sfemu/memquota"
)

// MatcherMemory bounds what a span's matcher holds (specs/logpuller.md
// LP13-LP16). The zero value keeps LP11 alone: the per-span MatcherQuota,
// past which a region is failed.
type MatcherMemory struct {
	// Memory is the adapter's shared memory quota (reorder buffers and
	// matchers together); nil charges nothing beyond MatcherQuota.
	Memory *memquota.Quota
	// Disk is the spill quota, charged for spilled prewrites until their
	// run is removed; nil is unlimited.
	Disk *memquota.Quota
	// Store keeps the prewrites that do not fit in memory; nil: a prewrite
	// that does not fit fails its region (LP11).
	Store PrewriteStore
	// Hint names the flags to raise in the overflow error.
	Hint string
}

// PrewriteRecord is one held PREWRITE as it goes to and comes back from a
// run. Nil and empty values stay apart.
type PrewriteRecord struct {
	StartTs  uint64
	Key      []byte
	Value    []byte
	OldValue []byte
}

// SpillCost is what a spilled prewrite is charged against the disk quota:
// its bytes plus a record's framing (an estimate of the file's overhead).
func (r *PrewriteRecord) SpillCost() int64 {
	return int64(len(r.Key)+len(r.Value)+len(r.OldValue)) + spillRecordOverhead
}

const spillRecordOverhead = 32

// PrewriteStore keeps runs of spilled prewrites outside memory; the core
// decides what to spill and keeps each run's index (the store is the only
// part that does I/O: files under <data-dir>/spill in the adapter, memory
// in tests).
type PrewriteStore interface {
	// Create starts a run of one region's prewrites. Records are appended
	// in strictly increasing (start_ts, key) order.
	Create(regionID uint64) (PrewriteWriter, error)
	// CreateDelivered starts a run of a span's delivered rows (LP17):
	// records are (start_ts, key) with the commit ts as an 8-byte value.
	CreateDelivered() (PrewriteWriter, error)
}

// PrewriteWriter appends the records of one run.
type PrewriteWriter interface {
	// Append writes rec and returns the offset it starts at. rec's bytes
	// are only valid during the call.
	Append(rec *PrewriteRecord) (offset int64, err error)
	// Finish makes the run readable; nothing is appended afterwards.
	Finish() (PrewriteRun, error)
	// Abort discards the run and what was written of it.
	Abort() error
}

// PrewriteRun is a finished run.
type PrewriteRun interface {
	// Name identifies the run in errors (a file path).
	Name() string
	// ReadBlock reads n consecutive records starting at offset off (an
	// offset Append returned). The records own their bytes. A damaged run
	// is an error naming the run and the offset.
	ReadBlock(off int64, n int) ([]PrewriteRecord, error)
	// Remove deletes the run.
	Remove() error
}

// MatcherOverflowError: a prewrite fits neither the memory quota nor the
// spill quota (LP15). Fatal: the feed stops rather than drop or loop.
type MatcherOverflowError struct {
	RegionID            uint64
	Need                int64
	MemName             string
	MemUsed, MemLimit   int64
	DiskUsed, DiskLimit int64
	Hint                string
}

func (e *MatcherOverflowError) Error() string {
	disk := "unlimited"
	if e.DiskLimit != memquota.Unlimited {
		disk = fmt.Sprintf("%d of %d bytes spilled", e.DiskUsed, e.DiskLimit)
	}
	msg := fmt.Sprintf("matcher: region %d: %d bytes of prewrites fit neither the %s (%d of %d bytes held) nor the spill-quota (%s)",
		e.RegionID, e.Need, e.MemName, e.MemUsed, e.MemLimit, disk)
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}
