package adapter

import (
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/searchfabric/sfemu/memquota"
)

// MemoryHeadroom is what the process may hold beyond the memory quota
// (RS11, issue 15: peak RSS <= quota + 128 MiB): the garbage the GC has
// not collected yet, the runtime's own memory (stacks, GC metadata), what
// the adapter holds uncharged (a bounded free list, gRPC buffers), and the
// process's memory outside Go (the binary's text).
const MemoryHeadroom = 128 << 20

// gcLimitInterval is how often the limit follows the memory the adapter
// does not own (RS11).
const gcLimitInterval = 250 * time.Millisecond

// GCLimit keeps Go's soft memory limit (runtime/debug.SetMemoryLimit) at
// the memory quota + MemoryHeadroom + the bytes held by what shares the
// process and is not the adapter's (RS11). Stop it to restore the limit
// it found.
type GCLimit struct {
	quota  *memquota.Quota
	others func() int64
	nonGo  int64
	prev   int64

	mu      sync.Mutex
	limit   int64
	stopped bool
	done    chan struct{}
	wg      sync.WaitGroup
}

// LimitGC sets the process's soft memory limit so the GC's headroom
// cannot take the adapter past quota + MemoryHeadroom (RS11): the limit
// is the quota + MemoryHeadroom + others() x (1 + GOGC/100), where
// others() is the bytes the process holds that are not the adapter's (nil
// when nothing else shares the process, e.g. the emulator runs apart;
// UnchargedLive with the emulator in process), which keep the room GOGC
// gives them, less the process's resident memory outside Go's runtime
// (read once here); never less than the live heap + MemoryHeadroom/4, so
// a live heap past the limit slows the GC down instead of making it
// thrash. It is re-set every 250 ms as others() changes. GOMEMLIMIT in
// the environment always wins: then LimitGC sets nothing (GOMEMLIMIT=off
// turns the limit off).
func (m Memory) LimitGC(others func() int64) *GCLimit {
	g := &GCLimit{quota: m.Quota, others: others, done: make(chan struct{})}
	if m.Quota == nil || os.Getenv("GOMEMLIMIT") != "" {
		g.stopped = true
		return g
	}
	g.nonGo = nonGoResident()
	g.prev = debug.SetMemoryLimit(-1)
	g.refresh()
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		t := time.NewTicker(gcLimitInterval)
		defer t.Stop()
		for {
			select {
			case <-g.done:
				return
			case <-t.C:
				g.refresh()
			}
		}
	}()
	return g
}

// Limit is the limit set last (0 when LimitGC set none).
func (g *GCLimit) Limit() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.limit
}

// refresh computes the limit and sets it when it moved by 1 MiB or more.
func (g *GCLimit) refresh() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return
	}
	var others int64
	if g.others != nil {
		// What others hold keeps GOGC's room: only the adapter's part
		// (its quota and its garbage) is capped.
		others = max(0, g.others()) * (100 + gogc()) / 100
	}
	limit := max(g.quota.Limit()+MemoryHeadroom+others-g.nonGo, gcLiveHeap()+MemoryHeadroom/4)
	if d := limit - g.limit; d >= 1<<20 || d <= -1<<20 {
		g.limit = limit
		debug.SetMemoryLimit(limit)
	}
}

// Stop ends the updates and restores the limit LimitGC found. It is
// idempotent.
func (g *GCLimit) Stop() {
	g.mu.Lock()
	if g.stopped {
		g.mu.Unlock()
		return
	}
	g.stopped = true
	close(g.done)
	debug.SetMemoryLimit(g.prev)
	g.mu.Unlock()
	g.wg.Wait()
}

// gogc is the GOGC percentage from the environment (100 when unset or
// unreadable, 0 for off: then others get no room beyond what they hold).
func gogc() int64 {
	v := os.Getenv("GOGC")
	if v == "off" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
		return n
	}
	return 100
}

// UnchargedLive is LimitGC's others for a process that holds more than
// the adapter (the in-process emulator and its documents): the live heap
// at the last GC less what the memory quota charges.
func UnchargedLive(q *memquota.Quota) func() int64 {
	return func() int64 { return gcLiveHeap() - q.Used() }
}

// gcLiveHeap is the heap the last GC marked live.
func gcLiveHeap() int64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}

// nonGoResident is the process's resident memory that Go's runtime does
// not manage (the binary's text and data, C libraries): VmRSS less the
// runtime's mapped memory not released to the OS (Linux; 0 elsewhere).
func nonGoResident() int64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	var rss int64
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			rss = kb << 10
		}
	}
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	goMem := int64(s[0].Value.Uint64()) - int64(s[1].Value.Uint64())
	return max(0, rss-goMem)
}
