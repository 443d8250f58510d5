package adapter

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/searchfabric/sfemu/memquota"
	"github.com/searchfabric/sfemu/spill"
	"github.com/searchfabric/sfemu/upstream/logpuller"
)

// DefaultMemoryQuota is the adapter's memory quota when none is set (RS1).
const DefaultMemoryQuota = 512 << 20

// IndexReserveShare: 1/32 of the memory quota is kept for the indexes of
// spilled runs (specs/logpuller.md LP18: ~2 bytes a spilled prewrite, so
// 8 MiB of a 256 MiB quota indexes about 4M of them); rows and prewrites
// held in memory are admitted up to the rest. The reserve also holds the
// log puller's event queue bound (specs/logpuller.md LP19).
const IndexReserveShare = 32

func newMemoryQuota(limit int64) (*memquota.Quota, error) {
	q, err := memquota.New("memory-quota", limit)
	if err != nil {
		return nil, err
	}
	// The reserve also holds the log puller's event queue (LP19): those
	// events are charged as they are decoded and may take the reserve.
	q.SetReserve(limit/IndexReserveShare + logpuller.EventQueueBytesFor(limit))
	return q, nil
}

// Memory is the adapter's memory quota and spill quota (specs/minicdc.md
// RS1-RS5). It outlives one adapter: the host makes it once, so restarts
// by the supervisor share it (and the log puller's matcher can charge the
// same quota), and reads it for /metrics and the status line.
type Memory struct {
	// Quota is the memory quota shared by every partition's reorder
	// buffer.
	Quota *memquota.Quota
	// Spill is the disk quota of spill files (nil: unlimited).
	Spill *memquota.Quota
	// Hint names what the operator raises in an overflow error.
	Hint string
}

// NewMemory makes the quotas: memoryQuota bytes (0 is refused: a quota
// must be > 0; use DefaultMemoryQuota) and spillQuota bytes of spill
// files, or, when spillQuota is -1, the free space under dataDir minus
// 1 GiB (spill.DefaultQuota).
func NewMemory(memoryQuota, spillQuota int64, dataDir string) (Memory, error) {
	mem, err := newMemoryQuota(memoryQuota)
	if err != nil {
		return Memory{}, err
	}
	if spillQuota == -1 {
		if err := os.MkdirAll(dataDir, 0o755); err != nil {
			return Memory{}, fmt.Errorf("adapter: data dir %s: %w", dataDir, err)
		}
		if spillQuota, err = spill.DefaultQuota(dataDir); err != nil {
			return Memory{}, err
		}
	}
	disk, err := memquota.New("spill-quota", spillQuota)
	if err != nil {
		return Memory{}, err
	}
	return Memory{Quota: mem, Spill: disk, Hint: "raise --spill-quota or free disk space (or raise --memory-quota)"}, nil
}

// matcherMemory bounds the log puller's matchers by the same quotas as
// the reorder buffers; their prewrites spill to the same directory
// (specs/logpuller.md LP13-LP16). Call after prepareMemory.
func (c *Config) matcherMemory() logpuller.MatcherMemory {
	mm := logpuller.MatcherMemory{Memory: c.Memory.Quota, Disk: c.Memory.Spill, Hint: c.Memory.Hint}
	if c.Bridge.Spill.Dir != nil {
		mm.Store = spill.NewPrewriteStore(c.Bridge.Spill.Dir)
	}
	return mm
}

// SpillDir is where an adapter over dataDir spills (RS7).
func SpillDir(dataDir string) string { return filepath.Join(dataDir, "spill") }

// prepareMemory fills the bridge's SpillConfig: the configured quotas (a
// default memory quota when none is set) and the spill directory under
// DataDir, emptied of an earlier run's files (RS4). Without DataDir the
// bridge holds rows within the quota and does not spill.
func (c *Config) prepareMemory() error {
	if c.Memory.Quota == nil {
		q, err := newMemoryQuota(DefaultMemoryQuota)
		if err != nil {
			return err
		}
		c.Memory.Quota = q
	}
	sc := &c.Bridge.Spill
	sc.Memory, sc.Disk, sc.Hint = c.Memory.Quota, c.Memory.Spill, c.Memory.Hint
	if c.DataDir == "" {
		return nil
	}
	d, err := spill.OpenDir(SpillDir(c.DataDir))
	if err != nil {
		return err
	}
	sc.Dir = d
	return nil
}
