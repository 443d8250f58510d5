package main

import (
	"testing"

	"github.com/pingcap/kvproto/pkg/cdcpb"
	"github.com/stretchr/testify/require"

	"github.com/searchfabric/sfemu/adapter"
	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/logpuller"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
)

type dropRows struct{}

func (dropRows) ConsumeKV([]kvevent.RawKVEntry) {}
func (dropRows) AdvanceResolvedTs(uint64)       {}

// TestSR14_StatusLineHeldIncludesTheMatcher (SR14, RS1, LP13): the status
// line's held MiB is every holder of the memory quota, as /metrics'
// sfemu_memory_held_bytes: prewrites a log puller's matcher holds for
// their commit count, not only rows in reorder buffers.
func TestSR14_StatusLineHeldIncludesTheMatcher(t *testing.T) {
	mem, err := adapter.NewMemory(64<<20, 1<<30, t.TempDir())
	require.NoError(t, err)
	prefix := tablecodec.EncodeRecordPrefix(nil, 7)
	span := kvevent.Span{StartKey: codec.EncodeBytes(nil, prefix), EndKey: codec.EncodeBytes(nil, tablecodec.PrefixNext(prefix))}
	p, err := logpuller.NewSpanPuller(logpuller.Config{Span: span, StartTs: 10, Consumer: dropRows{},
		Matcher: logpuller.MatcherMemory{Memory: mem.Quota}})
	require.NoError(t, err)
	_, err = p.AddRegion(1, 1, span)
	require.NoError(t, err)
	value := make([]byte, 1<<20)
	var rows []*cdcpb.Event_Row
	for h := int64(1); h <= 3; h++ {
		rows = append(rows, &cdcpb.Event_Row{Type: cdcpb.Event_PREWRITE, OpType: cdcpb.Event_Row_PUT, StartTs: 20,
			Key: tablecodec.EncodeIntRecordKey(nil, 7, h), Value: value})
	}
	_, err = p.HandleEvent(&cdcpb.Event{RegionId: 1, RequestId: 1, Event: &cdcpb.Event_Entries_{Entries: &cdcpb.Event_Entries{Entries: rows}}})
	require.NoError(t, err)
	held := mem.Quota.Used()
	require.Greater(t, held, int64(3<<20), "the matcher charges its prewrites")
	require.Equal(t, " held=3.0MiB spilled=0.0MiB spill_files=0", memoryWords(mem, nil))
}
