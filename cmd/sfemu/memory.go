package main

import (
	"fmt"
	"math"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/searchfabric/sfemu/adapter"
	"github.com/searchfabric/sfemu/memquota"
)

// The memory quota and the spill quota (specs/minicdc.md RS1-RS5,
// specs/sfemu-run.md SR14): --memory-quota bounds what the adapter holds
// (reorder buffers of every partition); past it, transactions spill to
// <data-dir>/spill within --spill-quota.

// parseSize reads a byte size: a number with an optional unit B, KiB,
// MiB, GiB, TiB (or K, M, G, T, meaning the same powers of 1024).
func parseSize(flag, s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("--%s %q: want a size like 512MiB, 2GiB or a number of bytes", flag, s)
	}
	return n * mult, nil
}

// quotas validates --memory-quota and --spill-quota: both must be > 0; an
// empty --spill-quota means the spill directory's free space minus 1 GiB
// (-1 for adapter.NewMemory).
func (c runConfig) quotas() (mem, spill int64, err error) {
	if mem, err = parseSize("memory-quota", c.MemoryQuota); err != nil {
		return 0, 0, err
	}
	if mem == 0 {
		return 0, 0, fmt.Errorf("--memory-quota must be > 0 (got %q): it bounds the rows the adapter holds in memory before spilling to <data-dir>/spill", c.MemoryQuota)
	}
	spill = -1
	if c.SpillQuota != "" {
		if spill, err = parseSize("spill-quota", c.SpillQuota); err != nil {
			return 0, 0, err
		}
		if spill == 0 {
			return 0, 0, fmt.Errorf("--spill-quota must be > 0 (got %q); leave it unset for the free space of <data-dir>/spill minus 1 GiB", c.SpillQuota)
		}
	}
	return mem, spill, nil
}

// adapterMemory makes the quotas the adapter (and its restarts) share.
func (c runConfig) adapterMemory() (adapter.Memory, error) {
	mem, spill, err := c.quotas()
	if err != nil {
		return adapter.Memory{}, err
	}
	m, err := adapter.NewMemory(mem, spill, c.DataDir)
	if err != nil {
		return adapter.Memory{}, err
	}
	m.Hint = "raise --spill-quota or free disk space under " + adapter.SpillDir(c.DataDir) + " (or raise --memory-quota)"
	return m, nil
}

var (
	mMemoryQuota   = desc("sfemu_memory_quota_bytes", "The adapter's memory quota (--memory-quota).")
	mMemoryHeld    = desc("sfemu_memory_held_bytes", "Bytes the adapter holds against its memory quota (rows in reorder buffers).")
	mSpillQuota    = desc("sfemu_spill_quota_bytes", "The spill quota (--spill-quota, or the spill directory's free space at start minus 1 GiB).")
	mSpilledBytes  = desc("sfemu_spilled_bytes", "Bytes of spill files on disk not yet removed.")
	mSpillFiles    = desc("sfemu_spill_files", "Spill files on disk (sorted runs of rows past the memory quota).")
	mReorderHeld   = desc("sfemu_reorder_held_bytes", "Bytes a source partition's reorder buffer holds in memory (charged to the memory quota).", "collection", "partition")
	mReorderSpilld = desc("sfemu_reorder_spilled_bytes", "Bytes of a source partition's spill files not yet removed.", "collection", "partition")
	mMemoryLimit   = desc("sfemu_memory_limit_bytes", "The Go runtime's soft memory limit: the adapter's (RS11) or GOMEMLIMIT's; 0 when there is none.")
	memoryDescs    = []*prometheus.Desc{mMemoryQuota, mMemoryHeld, mSpillQuota, mSpilledBytes, mSpillFiles, mReorderHeld, mReorderSpilld, mMemoryLimit}
)

// collectMemory adds the quota figures to a scrape; cur is the running
// adapter (nil between adapters).
func collectMemory(gauge func(d *prometheus.Desc, val float64, labels ...string), mem adapter.Memory, cur *adapter.Adapter) {
	if mem.Quota == nil {
		return
	}
	gauge(mMemoryQuota, float64(mem.Quota.Limit()))
	gauge(mMemoryHeld, float64(mem.Quota.Used()))
	spillLimit := float64(mem.Spill.Limit())
	if mem.Spill.Limit() == memquota.Unlimited {
		spillLimit = 0
	}
	gauge(mSpillQuota, spillLimit)
	gauge(mSpilledBytes, float64(mem.Spill.Used()))
	files := 0
	if cur != nil {
		for _, ps := range cur.Bridge.Stats() {
			files += ps.SpillFiles
			gauge(mReorderHeld, float64(ps.HeldBytes), ps.Collection, ps.Partition)
			gauge(mReorderSpilld, float64(ps.SpilledBytes), ps.Collection, ps.Partition)
		}
		mf, _ := cur.MatcherSpill()
		files += int(mf)
	}
	gauge(mSpillFiles, float64(files))
	gauge(mMemoryLimit, float64(goMemoryLimit()))
}

// goMemoryLimit is the runtime's soft memory limit as set now (by
// adapter.Memory.LimitGC, RS11, or GOMEMLIMIT), 0 for none.
func goMemoryLimit() int64 {
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
		return l
	}
	return 0
}

// memoryWords is the status line's part: held and spilled MiB, spill
// files. Held and spilled are the quotas' counts, as on /metrics: every
// holder of the memory quota (reorder buffers and the log puller's
// matcher, RS1/LP13) and every spill file (reorder and prewrite runs).
func memoryWords(mem adapter.Memory, a *adapter.Adapter) string {
	files := 0
	if a != nil {
		for _, ps := range a.Bridge.Stats() {
			files += ps.SpillFiles
		}
		mf, _ := a.MatcherSpill()
		files += int(mf)
	}
	return fmt.Sprintf(" held=%.1fMiB spilled=%.1fMiB spill_files=%d", mib(mem.Quota.Used()), mib(mem.Spill.Used()), files)
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
