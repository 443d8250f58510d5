package logpuller

import (
	"context"
	"runtime"
	"sync"
	"testing"

	"github.com/pingcap/kvproto/pkg/cdcpb"
	"github.com/stretchr/testify/require"

	"github.com/searchfabric/sfemu/memquota"
	"github.com/searchfabric/sfemu/upstream/kvevent"
)

// LP19: EventHeapBytes is the heap a decoded event holds: measured as the
// heap's growth while n events decoded from their wire bytes (as the gRPC
// codec decodes them) are held, within 10 %, for events of prewrites,
// commits, rows with old values and batched resolved ts.
func TestLP19_EventHeapBytesMatchTheHeap(t *testing.T) {
	val := []byte("a value of thirty bytes.......")
	old := []byte("an old value of a longer length, 48 bytes......")
	kinds := map[string]func(i int) *cdcpb.ChangeDataEvent{
		"prewrites": func(i int) *cdcpb.ChangeDataEvent {
			rows := make([]*cdcpb.Event_Row, 256)
			for j := range rows {
				rows[j] = &cdcpb.Event_Row{Type: cdcpb.Event_PREWRITE, OpType: cdcpb.Event_Row_PUT, StartTs: 20, Key: rawKey(1, int64(i*256+j)), Value: val}
			}
			return &cdcpb.ChangeDataEvent{Events: []*cdcpb.Event{{RegionId: 1, RequestId: 7, Event: &cdcpb.Event_Entries_{Entries: &cdcpb.Event_Entries{Entries: rows}}}}}
		},
		"commits and old values": func(i int) *cdcpb.ChangeDataEvent {
			var rows []*cdcpb.Event_Row
			for j := 0; j < 100; j++ {
				k := rawKey(1, int64(i*100+j))
				rows = append(rows,
					&cdcpb.Event_Row{Type: cdcpb.Event_PREWRITE, OpType: cdcpb.Event_Row_PUT, StartTs: 20, Key: k, Value: val, OldValue: old},
					&cdcpb.Event_Row{Type: cdcpb.Event_COMMIT, OpType: cdcpb.Event_Row_PUT, StartTs: 20, CommitTs: 30, Key: k})
			}
			return &cdcpb.ChangeDataEvent{Events: []*cdcpb.Event{
				{RegionId: 1, RequestId: 7, Event: &cdcpb.Event_Entries_{Entries: &cdcpb.Event_Entries{Entries: rows[:100]}}},
				{RegionId: 2, RequestId: 7, Event: &cdcpb.Event_Entries_{Entries: &cdcpb.Event_Entries{Entries: rows[100:]}}},
				{RegionId: 3, RequestId: 7, Event: &cdcpb.Event_ResolvedTs{ResolvedTs: 25}},
			}}
		},
		"batched resolved ts": func(i int) *cdcpb.ChangeDataEvent {
			regions := make([]uint64, 300)
			for j := range regions {
				regions[j] = uint64(i*300 + j)
			}
			return &cdcpb.ChangeDataEvent{ResolvedTs: &cdcpb.ResolvedTs{Regions: regions, Ts: 40, RequestId: 7}}
		},
	}
	for name, mk := range kinds {
		for _, n := range []int{200, 2000} {
			wire := make([][]byte, n)
			for i := range wire {
				b, err := mk(i).Marshal()
				require.NoError(t, err)
				wire[i] = b
			}
			held := make([]*cdcpb.ChangeDataEvent, n)
			grew := heapGrowth(func() {
				for i, b := range wire {
					ev := new(cdcpb.ChangeDataEvent)
					require.NoError(t, ev.Unmarshal(b))
					held[i] = ev
				}
			})
			var charged int64
			for _, ev := range held {
				charged += EventHeapBytes(ev)
			}
			ratio := float64(charged) / float64(grew)
			t.Logf("%s, %d events: charged %d B, heap grew %d B; charged/heap %.3f", name, n, charged, grew, ratio)
			require.InDelta(t, 1, ratio, 0.10, "%s, %d events: charged %d, heap grew %d", name, n, charged, grew)
			runtime.KeepAlive(held)
			runtime.KeepAlive(wire)
		}
	}
}

// gateConsumer blocks its first ConsumeKV until open is closed, holding
// Run, and counts rows. On entering it notes what the cores charged the
// quota: everything charged beside the event queue, which nothing changes
// while Run waits.
type gateConsumer struct {
	open    chan struct{}
	entered chan struct{}
	src     *GRPCSource
	mem     *memquota.Quota
	cores   int64
	once    sync.Once
	mu      sync.Mutex
	rows    int
}

func (g *gateConsumer) ConsumeKV(es []kvevent.RawKVEntry) {
	g.once.Do(func() {
		q := &g.src.queue
		q.mu.Lock()
		g.cores = g.mem.Used() - q.stats.Bytes
		q.mu.Unlock()
		close(g.entered)
		<-g.open
	})
	g.mu.Lock()
	g.rows += len(es)
	g.mu.Unlock()
}

func (g *gateConsumer) AdvanceResolvedTs(uint64) {}

func (g *gateConsumer) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.rows
}

// LP19: while Run is held by a slow consumer, the stream receiver stops
// at the event queue's bound (flow control holds the rest in the store),
// the queue's bytes are charged to the memory quota, and every byte goes
// back once the events are handled and the source stops; every row still
// arrives, once.
func TestLP19_EventQueueBoundedAndCharged(t *testing.T) {
	const bound = 256 << 10
	const rows = 20_000
	c := newDblCluster(t, 1, false)
	mem := mustQuota(t, "memory-quota", 1<<30)
	rs := startGRPCSource(t, TransportConfig{ClusterID: c.clusterID, Locator: c.locator, EventQueueBytes: bound,
		Matcher: MatcherMemory{Memory: mem}})
	g := &gateConsumer{open: make(chan struct{}), entered: make(chan struct{}), src: rs.src, mem: mem}
	t.Cleanup(func() { // before the source stops: a failed test leaves Run waiting
		select {
		case <-g.open:
		default:
			close(g.open)
		}
	})
	require.NoError(t, rs.src.Subscribe(context.Background(), 7, tableSpan(1), tsAt(1000), g))
	eventually(t, "registration", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.regs) == 1 })
	// Events of 256 prewrites and their 256 commits (~50 KiB each).
	for from := int64(0); from < rows; from += 256 {
		c.commitMany(1, from, int(min(256, rows-from)), []byte("a value of thirty bytes......."), tsAt(1001), tsAt(1002))
	}
	<-g.entered
	// The biggest event the double sends, as it arrives decoded.
	var biggest int64
	{
		var rs []*cdcpb.Event_Row
		for j := int64(0); j < 256; j++ {
			k := rawKey(1, j)
			rs = append(rs,
				&cdcpb.Event_Row{StartTs: tsAt(1001), Type: cdcpb.Event_PREWRITE, OpType: cdcpb.Event_Row_PUT, Key: k, Value: []byte("a value of thirty bytes.......")},
				&cdcpb.Event_Row{StartTs: tsAt(1001), CommitTs: tsAt(1002), Type: cdcpb.Event_COMMIT, OpType: cdcpb.Event_Row_PUT, Key: k})
		}
		b, err := (&cdcpb.ChangeDataEvent{Events: []*cdcpb.Event{{RegionId: 1, RequestId: 1 << 40, Event: &cdcpb.Event_Entries_{Entries: &cdcpb.Event_Entries{Entries: rs}}}}}).Marshal()
		require.NoError(t, err)
		ev := new(cdcpb.ChangeDataEvent)
		require.NoError(t, ev.Unmarshal(b))
		biggest = EventHeapBytes(ev)
	}
	// The receiver admits events until the next does not fit.
	eventually(t, "a full queue", func() bool { return rs.src.QueueStats().Bytes+biggest > bound })
	st := rs.src.QueueStats()
	now, peak := st.Bytes, st.Peak
	require.Positive(t, now)
	require.Equal(t, g.cores+now, mem.Used(), "the queue's bytes are charged to the memory quota beside the cores' charges")
	require.LessOrEqual(t, peak, int64(bound), "the queue stays within its bound")
	total := int64(rows/256+1) * biggest
	require.Less(t, now, total/4, "the receiver stopped at the bound instead of taking every event")
	close(g.open)
	eventually(t, "every row", func() bool { return g.count() == rows })
	peak = rs.src.QueueStats().Peak
	require.LessOrEqual(t, peak, int64(bound), "the queue stayed within its bound")
	require.GreaterOrEqual(t, mem.Peak(), peak, "the queue's peak was charged")
	require.NoError(t, rs.stop(t))
	require.Zero(t, rs.src.QueueStats().Bytes)
	require.Zero(t, rs.src.QueueStats().Uncharged)
	require.Zero(t, mem.Used(), "every queued byte goes back once handled or dropped")
}

// LP19: the queue charges what the quota (its reserve included) can take;
// an event it cannot take waits for the queue to give its charge back,
// and passes uncharged (counted) only through an empty queue, so the
// quota is never passed and Run always gets the event it needs.
func TestLP19_EventTheQuotaCannotTakePassesUncharged(t *testing.T) {
	mem := mustQuota(t, "memory-quota", 100<<10)
	mem.SetReserve(40 << 10)
	require.True(t, mem.TryAcquire(50<<10), "others hold half")
	q := &eventQueue{limit: 64 << 10, quota: mem}
	ctx := context.Background()

	c1, ok := q.admit(ctx, 30<<10)
	require.True(t, ok)
	require.Equal(t, int64(30<<10), c1, "charged, from the reserve too")
	require.Equal(t, int64(80<<10), mem.Used())

	// 30 KiB more fit the bound but not the quota: it waits for the queue.
	got := make(chan int64)
	go func() {
		c, ok := q.admit(ctx, 30<<10)
		if !ok {
			c = -1
		}
		got <- c
	}()
	select {
	case <-got:
		t.Fatal("an event the quota cannot take was admitted beside a queued one")
	default:
	}
	q.done(30<<10, c1)
	require.Equal(t, int64(30<<10), <-got, "charged once the queue gave its charge back")
	require.Equal(t, int64(80<<10), mem.Used())
	q.done(30<<10, 30<<10)

	// An event larger than the quota's room passes an empty queue uncharged.
	c3, ok := q.admit(ctx, 200<<10)
	require.True(t, ok)
	require.Zero(t, c3)
	st := q.snapshot()
	require.Equal(t, QueueStats{Bytes: 200 << 10, Peak: 200 << 10, Uncharged: 1, UnchargedBytes: 200 << 10}, st)
	require.Equal(t, int64(50<<10), mem.Used())
	require.LessOrEqual(t, mem.Peak(), int64(100<<10), "the quota is never passed")
	q.done(200<<10, c3)
	require.Zero(t, q.snapshot().Bytes)
	require.Equal(t, int64(50<<10), mem.Used())
}
