// Tests for the prewrite run files (specs/logpuller.md LP14, LP16).
package spill

import (
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pingcap/kvproto/pkg/cdcpb"
	"github.com/stretchr/testify/require"

	"github.com/searchfabric/sfemu/memquota"
	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/logpuller"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
)

// TestLP14_PrewriteRunRoundTrip: records come back as written, nil and
// empty values apart, block by block from any record offset; Remove
// deletes the file and a startup removes leftovers.
func TestLP14_PrewriteRunRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spill")
	d, err := OpenDir(path)
	require.NoError(t, err)
	s := NewPrewriteStore(d)
	recs := []logpuller.PrewriteRecord{
		{StartTs: 5, Key: []byte("a"), Value: []byte("v1"), OldValue: []byte("o1")},
		{StartTs: 5, Key: []byte("b"), Value: []byte{}, OldValue: nil},
		{StartTs: 5, Key: []byte("c"), Value: nil, OldValue: []byte{}},
		{StartTs: 6, Key: []byte("a"), Value: []byte(strings.Repeat("x", 100_000))},
	}
	w, err := s.Create(7)
	require.NoError(t, err)
	var offs []int64
	for i := range recs {
		off, err := w.Append(&recs[i])
		require.NoError(t, err)
		offs = append(offs, off)
	}
	r, err := w.Finish()
	require.NoError(t, err)
	require.Contains(t, r.Name(), "prewrites-r7")
	got, err := r.ReadBlock(offs[0], len(recs))
	require.NoError(t, err)
	require.Equal(t, recs, got)
	require.Nil(t, got[1].OldValue)
	require.NotNil(t, got[1].Value)
	require.Nil(t, got[2].Value)
	require.NotNil(t, got[2].OldValue)
	got, err = r.ReadBlock(offs[2], 2)
	require.NoError(t, err)
	require.Equal(t, recs[2:], got)
	require.Equal(t, int64(1), d.Files())

	w2, err := s.Create(8)
	require.NoError(t, err)
	_, err = w2.Append(&recs[0])
	require.NoError(t, err)
	_, err = w2.Finish()
	require.NoError(t, err)
	require.NoError(t, r.Remove())
	_, err = os.Stat(r.Name())
	require.True(t, errors.Is(err, os.ErrNotExist))
	// A restart removes the run the previous process left (RS4).
	_, err = OpenDir(path)
	require.NoError(t, err)
	ents, _ := os.ReadDir(path)
	require.Empty(t, ents)
}

// TestLP16_DamagedPrewriteRunNamesFileAndOffset: a flipped byte in the
// second record is a DamagedError naming the file and the block's offset.
func TestLP16_DamagedPrewriteRunNamesFileAndOffset(t *testing.T) {
	d, err := OpenDir(t.TempDir())
	require.NoError(t, err)
	w, err := NewPrewriteStore(d).Create(1)
	require.NoError(t, err)
	var offs []int64
	for i := 0; i < 3; i++ {
		off, err := w.Append(&logpuller.PrewriteRecord{StartTs: 9, Key: []byte{byte('a' + i)}, Value: []byte("value")})
		require.NoError(t, err)
		offs = append(offs, off)
	}
	r, err := w.Finish()
	require.NoError(t, err)
	f, err := os.OpenFile(r.Name(), os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{0xff}, offs[1]+recHeader+3)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	_, err = r.ReadBlock(offs[0], 3)
	var de *DamagedError
	require.ErrorAs(t, err, &de)
	require.Equal(t, r.Name(), de.File)
	require.Contains(t, err.Error(), fmt.Sprintf("damaged record at offset %d: checksum mismatch", offs[1]))
	_, err = r.ReadBlock(offs[2], 1)
	require.NoError(t, err, "the records around it still read")
}

// deliveredLive counts the delivered-row run files in d (LP17).
func deliveredLive(t *testing.T, d *Dir) int {
	ents, err := os.ReadDir(d.Path())
	require.NoError(t, err)
	n := 0
	for _, e := range ents {
		if strings.Contains(e.Name(), "-delivered") {
			n++
		}
	}
	return n
}

// TestLP14_SpanPullerSpillsToFiles: a transaction of 20k prewrites in a
// 64 KiB memory quota spills to run files; its COMMITs, in random order,
// get every value back; the files are gone once all were taken, and a
// disk full while spilling stops the feed with `spill: no space left on`.
func TestLP14_SpanPullerSpillsToFiles(t *testing.T) {
	seed := rand.Int63()
	rng := rand.New(rand.NewSource(seed))
	d, err := OpenDir(t.TempDir())
	require.NoError(t, err)
	mem, err := memquota.New("memory-quota", 64<<10)
	require.NoError(t, err)
	disk, err := memquota.New("spill-quota", 1<<30)
	require.NoError(t, err)
	out := &countingConsumer{values: map[string]string{}}
	p, err := logpuller.NewSpanPuller(logpuller.Config{
		Span:    kvevent.Span{StartKey: codec.EncodeBytes(nil, tablecodec.EncodeTablePrefix(nil, 1)), EndKey: codec.EncodeBytes(nil, tablecodec.EncodeTablePrefix(nil, 2))},
		StartTs: 10, Consumer: out,
		Matcher: logpuller.MatcherMemory{Memory: mem, Disk: disk, Store: NewPrewriteStore(d)},
	})
	require.NoError(t, err)
	span := kvevent.Span{StartKey: codec.EncodeBytes(nil, tablecodec.EncodeTablePrefix(nil, 1)), EndKey: codec.EncodeBytes(nil, tablecodec.EncodeTablePrefix(nil, 2))}
	_, err = p.AddRegion(1, 1, span)
	require.NoError(t, err)
	const n = 20_000
	send := func(rows []*cdcpb.Event_Row) {
		_, err := p.HandleEvent(&cdcpb.Event{RegionId: 1, RequestId: 1, Event: &cdcpb.Event_Entries_{Entries: &cdcpb.Event_Entries{Entries: rows}}})
		require.NoError(t, err, "seed %d", seed)
	}
	send([]*cdcpb.Event_Row{{Type: cdcpb.Event_INITIALIZED}})
	key := func(h int) []byte { return tablecodec.EncodeIntRecordKey(nil, 1, int64(h)) }
	for i := 0; i < n; i += 500 {
		var rows []*cdcpb.Event_Row
		for h := i; h < i+500; h++ {
			rows = append(rows, &cdcpb.Event_Row{Type: cdcpb.Event_PREWRITE, OpType: cdcpb.Event_Row_PUT, StartTs: 20, Key: key(h), Value: []byte(fmt.Sprintf("value-%d", h))})
		}
		send(rows)
		require.LessOrEqual(t, mem.Peak(), int64(64<<10))
	}
	require.Greater(t, p.Stats().SpillRuns, uint64(1), "the transaction spilled")
	require.Greater(t, d.Files(), int64(0))
	order := rng.Perm(n)
	for i := 0; i < n; i += 1000 {
		var rows []*cdcpb.Event_Row
		for _, h := range order[i : i+1000] {
			rows = append(rows, &cdcpb.Event_Row{Type: cdcpb.Event_COMMIT, OpType: cdcpb.Event_Row_PUT, StartTs: 20, CommitTs: 30, Key: key(h)})
		}
		send(rows)
	}
	require.Len(t, out.values, n, "seed %d", seed)
	for h := 0; h < n; h++ {
		require.Equal(t, fmt.Sprintf("value-%d", h), out.values[string(key(h))], "seed %d", seed)
	}
	require.Zero(t, d.PrewriteFiles()-int64(deliveredLive(t, d)), "prewrite runs removed once every prewrite was taken")
	// LP17: the 20k delivered rows did not fit the quota either: they are
	// in runs until the resolved ts passes their commit ts.
	require.Greater(t, d.DeliveredRuns(), uint64(0), "the delivered set spilled")
	p.HandleResolvedTs(&cdcpb.ResolvedTs{Regions: []uint64{1}, Ts: 31})
	require.Zero(t, d.Files(), "runs removed once every prewrite was taken and the resolved ts passed the rows")
	require.Zero(t, mem.Used())
	require.Zero(t, disk.Used())
	ents, _ := os.ReadDir(d.Path())
	require.Empty(t, ents)

	// Disk full while spilling: fatal, naming the directory.
	full, err := OpenDir(t.TempDir(), WithWriter(func(f *os.File) io.Writer {
		return &failAfter{w: f, limit: 100, err: &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}}
	}))
	require.NoError(t, err)
	p2, err := logpuller.NewSpanPuller(logpuller.Config{Span: span, StartTs: 10, Consumer: out,
		Matcher: logpuller.MatcherMemory{Memory: mem, Store: NewPrewriteStore(full)}})
	require.NoError(t, err)
	_, err = p2.AddRegion(1, 1, span)
	require.NoError(t, err)
	var last error
	for i := 0; i < n && last == nil; i += 500 {
		var rows []*cdcpb.Event_Row
		for h := i; h < i+500; h++ {
			rows = append(rows, &cdcpb.Event_Row{Type: cdcpb.Event_PREWRITE, OpType: cdcpb.Event_Row_PUT, StartTs: 20, Key: key(h), Value: []byte(strings.Repeat("v", 300))})
		}
		_, last = p2.HandleEvent(&cdcpb.Event{RegionId: 1, RequestId: 1, Event: &cdcpb.Event_Entries_{Entries: &cdcpb.Event_Entries{Entries: rows}}})
	}
	require.Error(t, last)
	require.Contains(t, last.Error(), "spill: no space left on "+full.Path())
	p2.Release()
	require.Zero(t, mem.Used(), "a stopped span gives its memory back")
	require.Zero(t, full.Files())
}

type countingConsumer struct{ values map[string]string }

func (c *countingConsumer) ConsumeKV(es []kvevent.RawKVEntry) {
	for _, e := range es {
		c.values[string(e.Key)] = string(e.Value)
	}
}

func (c *countingConsumer) AdvanceResolvedTs(uint64) {}
