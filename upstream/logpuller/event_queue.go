package logpuller

import (
	"context"
	"sync"
	"unsafe"

	"github.com/pingcap/kvproto/pkg/cdcpb"

	"github.com/searchfabric/sfemu/memquota"
)

// DefaultEventQueueBytes bounds the heap bytes of received events waiting
// for Run when no memory quota sets a smaller bound (LP19).
const DefaultEventQueueBytes = 8 << 20

// EventQueueBytesFor is the event queue's bound under a memory quota of
// limit bytes: 1/16 of it, at most DefaultEventQueueBytes (LP19). The
// adapter keeps that much of the quota in its reserve, so the holders
// that spill leave room for the queue.
func EventQueueBytesFor(limit int64) int64 {
	return min(DefaultEventQueueBytes, max(limit/16, 1))
}

// eventQueue counts the heap bytes of the events the stream receivers
// handed to Run and Run has not finished with yet, bounds them and
// charges them to the shared memory quota (LP19). The events themselves
// travel through GRPCSource.events, whose capacity bounds their count.
type eventQueue struct {
	limit int64
	quota *memquota.Quota

	mu    sync.Mutex
	stats QueueStats
	// wait is closed when bytes go down; nil while nobody waits.
	wait chan struct{}
}

// QueueStats is the event queue's accounting (LP19).
type QueueStats struct {
	// Bytes is the heap of the events received and not yet handled, Peak
	// the most ever at once.
	Bytes, Peak int64
	// Uncharged counts the events the memory quota could not take (each
	// passed alone, through an empty queue), UnchargedBytes their heap.
	Uncharged, UnchargedBytes int64
}

// admit waits until an event of n bytes fits under the bound and the
// memory quota (its reserve included), then counts and charges it, and
// returns the bytes charged. An empty queue admits any event: one larger
// than the bound passes alone, and one the quota cannot take passes
// uncharged (counted), since it is already in memory and Run needs it to
// free what holds the quota. It returns false when ctx ends first.
func (q *eventQueue) admit(ctx context.Context, n int64) (charged int64, ok bool) {
	for {
		q.mu.Lock()
		if q.stats.Bytes == 0 || q.stats.Bytes+n <= q.limit {
			switch {
			case q.quota.TryAcquireReserved(n):
				charged = n
			case q.stats.Bytes == 0:
				q.stats.Uncharged++
				q.stats.UnchargedBytes += n
			default:
				charged = -1 // wait for the queue to give its charge back
			}
			if charged >= 0 {
				q.stats.Bytes += n
				q.stats.Peak = max(q.stats.Peak, q.stats.Bytes)
				q.mu.Unlock()
				return charged, true
			}
			charged = 0
		}
		if q.wait == nil {
			q.wait = make(chan struct{})
		}
		w := q.wait
		q.mu.Unlock()
		select {
		case <-w:
		case <-ctx.Done():
			return 0, false
		}
	}
}

// done gives back an event admitted earlier (n bytes queued, charged of
// them charged): Run handled (or dropped) it, and the core kept only its
// own copies of what it holds.
func (q *eventQueue) done(n, charged int64) {
	if n <= 0 {
		return
	}
	q.mu.Lock()
	q.quota.Release(charged)
	q.stats.Bytes -= n
	if q.wait != nil {
		close(q.wait)
		q.wait = nil
	}
	q.mu.Unlock()
}

// snapshot copies the accounting.
func (q *eventQueue) snapshot() QueueStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.stats
}

// EventHeapBytes is the heap a decoded ChangeDataEvent holds, as gogo
// protobuf's Unmarshal allocates it (LP19): every message struct, the
// slices of pointers at their capacity, and each row's key, value and old
// value at their capacity (append sized them to a size class), the rest
// at the allocator's size class.
// Rare event kinds (errors, admin, long transactions) count their wire
// size. Measured within 10 % of the heap by TestLP19_EventHeapBytesMatchTheHeap.
func EventHeapBytes(ev *cdcpb.ChangeDataEvent) int64 {
	if ev == nil {
		return 0
	}
	n := allocSize(int(unsafe.Sizeof(*ev))) + grownBytes(cap(ev.Events)*8)
	if r := ev.ResolvedTs; r != nil {
		n += allocSize(int(unsafe.Sizeof(*r))) + allocSize(cap(r.Regions)*8)
	}
	for _, e := range ev.Events {
		n += allocSize(int(unsafe.Sizeof(*e)))
		switch x := e.Event.(type) {
		case *cdcpb.Event_Entries_:
			n += allocSize(int(unsafe.Sizeof(*x)))
			if x.Entries == nil {
				continue
			}
			n += allocSize(int(unsafe.Sizeof(*x.Entries))) + grownBytes(cap(x.Entries.Entries)*8)
			for _, r := range x.Entries.Entries {
				n += rowHeapBytes + grownBytes(cap(r.Key)) + grownBytes(cap(r.Value)) + grownBytes(cap(r.OldValue))
			}
		case *cdcpb.Event_ResolvedTs:
			n += allocSize(int(unsafe.Sizeof(*x)))
		case nil:
		default:
			n += allocSize(e.Size())
		}
	}
	return int64(n)
}

var rowHeapBytes = allocSize(int(unsafe.Sizeof(cdcpb.Event_Row{})))

// grownBytes is the heap of a slice of n bytes of capacity grown by
// append, which rounds the capacity up to the allocator's size class
// itself (allocSize would round 24 to 32).
func grownBytes(n int) int {
	if n <= 32<<10 {
		return n
	}
	return allocSize(n)
}
