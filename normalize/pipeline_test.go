package normalize

import (
	"context"
	"fmt"
	"math/rand"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// TestN21CutPointsByBytes: a batch ends before the mutation that would
// take it past the byte bound; a mutation larger than the bound is a batch
// of its own; the row bound still applies.
func TestN21CutPointsByBytes(t *testing.T) {
	sizes := []int64{40, 40, 40, 150, 10, 10, 10, 10, 10, 90, 20}
	got := cutPoints(len(sizes), 4, 100, func(i int) int64 { return sizes[i] }, func(int) string { return "g" }, nil)
	require.Equal(t, []int{2, 3, 4, 8, 10, 11}, got)
	require.Equal(t, []int{1}, cutPoints(1, 4, 10, func(int) int64 { return 500 }, func(int) string { return "g" }, nil))
}

// serialSink fails the test when two Ingest calls overlap, records the
// sequence of first seqs, and can fail the n-th Ingest.
type serialSink struct {
	*fakeSink
	t        *testing.T
	inflight atomic.Int32
	firsts   []uint64
	failAt   int // 1-based; 0: never
	delay    time.Duration
}

func (s *serialSink) Ingest(ctx context.Context, b *apiv1.MutationBatch) (*apiv1.IngestResponse, error) {
	if s.inflight.Add(1) != 1 {
		s.t.Errorf("concurrent Ingest calls (batch first seq %d)", b.GetFirstSeq())
	}
	defer s.inflight.Add(-1)
	time.Sleep(s.delay) // let the builder run ahead (no timing is asserted)
	s.firsts = append(s.firsts, b.GetFirstSeq())
	if s.failAt > 0 && len(s.firsts) == s.failAt {
		return nil, fmt.Errorf("injected failure of batch %d", s.failAt)
	}
	return s.fakeSink.Ingest(ctx, b)
}

// TestN39PipelinedDrainIsOrderedGapFreeAndSerial: a drain of many batches
// (built ahead on a helper goroutine) reaches the sink one call at a time,
// in seq order without gaps, progress after the last acknowledgement.
func TestN39PipelinedDrainIsOrderedGapFreeAndSerial(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	sink := &serialSink{fakeSink: newFakeSink(), t: t, delay: 100 * time.Microsecond}
	maxRows := 1 + rng.Intn(16)
	h := newHarness(t, sink.fakeSink, Config{MaxBatchRows: maxRows, Tables: []Table{{PhysicalID: 42, Database: "shop", Info: mt(intPKTable(42, "items"))}}})
	// The bridge writes through the serial wrapper.
	h.b.sink = sink
	n := 200 + rng.Intn(300)
	for i := 0; i < n; i++ {
		h.upsert(42, 110+uint64(rng.Intn(50)), row(int64(i), strings.Repeat("x", rng.Intn(40)), int64(i)))
	}
	h.checkpoint(map[int64]uint64{42: 200})
	require.Greater(t, len(sink.firsts), 1, "seed %d", seed)
	next := uint64(1)
	for i, b := range sink.fakeSink.batches {
		require.Equal(t, next, b.GetFirstSeq(), "seed %d batch %d", seed, i)
		require.LessOrEqual(t, len(b.GetMutations()), maxRows)
		next += uint64(len(b.GetMutations()))
	}
	require.Equal(t, uint64(n+1), next, "seed %d", seed)
	calls := sink.fakeSink.calls
	require.Equal(t, "adv:table:42", calls[len(calls)-1], "progress after every batch (N22)")
	require.Equal(t, uint64(200), sink.fakeSink.parts["table:42"].GetResolvedTs())
}

// TestN39PipelinedDrainFailsFast: when batch k fails, no later batch is
// sent, no progress is stored, the bridge stops (N7) and the builder
// goroutine is gone.
func TestN39PipelinedDrainFailsFast(t *testing.T) {
	for _, failAt := range []int{1, 2, 5} {
		sink := &serialSink{fakeSink: newFakeSink(), t: t, failAt: failAt}
		h := newHarness(t, sink.fakeSink, Config{MaxBatchRows: 3, Tables: []Table{{PhysicalID: 42, Database: "shop", Info: mt(intPKTable(42, "items"))}}})
		h.b.sink = sink
		for i := 0; i < 30; i++ {
			h.upsert(42, 110+uint64(i), row(int64(i), "x", 0))
		}
		err := h.b.Checkpoint(h.ctx, map[int64]uint64{42: 200})
		require.ErrorContains(t, err, fmt.Sprintf("injected failure of batch %d", failAt))
		require.Len(t, sink.firsts, failAt, "nothing sent after the failed batch")
		for i, f := range sink.firsts {
			require.Equal(t, uint64(1+3*i), f)
		}
		require.Len(t, sink.fakeSink.advs, 0, "no progress past unacknowledged data")
		require.ErrorContains(t, h.b.Err(), "injected failure")
		// ingestPipelined returns only after the builder closed `exited`;
		// the goroutine itself is reaped a moment later, so look for its
		// frame (not the process-wide count, which other goroutines move).
		require.Eventually(t, func() bool { return !builderRunning() }, 2*time.Second, time.Millisecond,
			"the builder goroutine exited")
	}
}

// builderRunning reports whether any goroutine is in ingestPipelined's
// builder closure.
func builderRunning() bool {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	return strings.Contains(string(buf[:n]), "normalize.(*Bridge).ingestPipelined.func")
}

// TestN21BatchesStayUnderMaxBatchBytes: with random row widths every
// batch of more than one mutation encodes within MaxBatchBytes (the
// estimate is an upper bound), and the seqs stay contiguous.
func TestN21BatchesStayUnderMaxBatchBytes(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	ti := intPKTable(42, "items", colDef{name: "body", tp: mysql.TypeBlob, flen: 65535}, colDef{name: "a_rather_long_column_name", tp: mysql.TypeDouble})
	const limit = 4096
	sink := newFakeSink()
	h := newHarness(t, sink, Config{MaxBatchBytes: limit, Tables: []Table{{PhysicalID: 42, Database: "shop", Info: mt(ti)}}})
	for i := 0; i < 300; i++ {
		r := row(int64(i), strings.Repeat("t", rng.Intn(100)), rng.Int63())
		r[3] = value.NewStringDatum(strings.Repeat("b", rng.Intn(1500)))
		r[4] = value.NewFloat64Datum(rng.Float64())
		h.upsert(42, 110+uint64(i), r)
	}
	h.checkpoint(map[int64]uint64{42: 1000})
	require.Greater(t, len(sink.batches), 10, "seed %d", seed)
	next := uint64(1)
	for i, b := range sink.batches {
		if len(b.GetMutations()) > 1 {
			require.LessOrEqual(t, proto.Size(b), limit, "seed %d batch %d", seed, i)
		}
		require.Equal(t, next, b.GetFirstSeq())
		next += uint64(len(b.GetMutations()))
	}
	require.Equal(t, uint64(301), next)
}
