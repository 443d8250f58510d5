package grpcserver

import (
	"math/rand"
	"testing"

	"github.com/pingcap/kvproto/pkg/cdcpb"
	"github.com/stretchr/testify/require"
)

// TestTranslateCoalescesWithinLimits: consecutive event deliveries are
// coalesced into messages of at most 128 events and about 1 MiB of rows,
// an event is never split, resolved ts are never mixed in, and order is
// kept. (G57)
func TestTranslateCoalescesWithinLimits(t *testing.T) {
	seed := rand.Int63()
	rng := rand.New(rand.NewSource(seed))
	cn := &conn{mux: true, versionSet: true, version: semver{8, 5, 0}, active: map[uint64]uint64{}}
	var in []*cdcpb.ChangeDataEvent
	var want []uint64 // event order by region id
	for i := 0; i < 2000; i++ {
		if rng.Intn(50) == 0 {
			in = append(in, &cdcpb.ChangeDataEvent{ResolvedTs: &cdcpb.ResolvedTs{Regions: []uint64{1}, Ts: uint64(i + 1), RequestId: 1}})
			continue
		}
		rows := make([]*cdcpb.Event_Row, 1+rng.Intn(8))
		for j := range rows {
			rows[j] = &cdcpb.Event_Row{Type: cdcpb.Event_COMMITTED, Key: make([]byte, 19), Value: make([]byte, rng.Intn(64<<10))}
		}
		id := uint64(i + 1)
		want = append(want, id)
		in = append(in, &cdcpb.ChangeDataEvent{Events: []*cdcpb.Event{{RegionId: id, RequestId: 1,
			Event: &cdcpb.Event_Entries_{Entries: &cdcpb.Event_Entries{Entries: rows}}}}})
	}
	out := cn.translate(nil, in)
	var got []uint64
	full := 0
	for _, m := range out {
		if m.ResolvedTs != nil {
			require.Empty(t, m.Events, "seed %d: resolved ts and events in one message", seed)
			continue
		}
		require.LessOrEqual(t, len(m.Events), 128, "seed %d", seed)
		bytes := 0
		for _, e := range m.Events {
			got = append(got, e.RegionId)
			bytes += eventPayload(e)
		}
		if len(m.Events) > 1 {
			require.LessOrEqual(t, bytes, 1<<20, "seed %d: %d events, %d bytes", seed, len(m.Events), bytes)
		}
		if bytes > 1<<19 {
			full++
		}
	}
	require.Equal(t, want, got, "seed %d: events reordered or lost", seed)
	require.Greater(t, full, 10, "seed %d: messages are not being coalesced up to the byte cap", seed)
}
