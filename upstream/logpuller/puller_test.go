package logpuller

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/pingcap/kvproto/pkg/cdcpb"
	"github.com/pingcap/kvproto/pkg/errorpb"
	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
	"github.com/stretchr/testify/require"
)

// recorder is a kvevent.Consumer that logs what it receives.
type recorder struct {
	rows     []kvevent.RawKVEntry
	resolved []uint64
}

func (r *recorder) ConsumeKV(es []kvevent.RawKVEntry) {
	for _, e := range es {
		e.Key = cloneBytes(e.Key)
		e.Value = cloneBytes(e.Value)
		e.OldValue = cloneBytes(e.OldValue)
		r.rows = append(r.rows, e)
	}
}
func (r *recorder) AdvanceResolvedTs(ts uint64) { r.resolved = append(r.resolved, ts) }

func (r *recorder) log() []string {
	var out []string
	for _, e := range r.rows {
		out = append(out, fmt.Sprintf("%s %s@%d/%d v=%s old=%s", e.OpType, e.Key, e.CRTs, e.StartTs, e.Value, e.OldValue))
	}
	return out
}

// rawKey builds a record key t{table}_r{handle} like TiDB does.
func rawKey(table, handle int64) []byte {
	k := []byte{'t'}
	k = binary.BigEndian.AppendUint64(k, uint64(table)^(1<<63))
	k = append(k, '_', 'r')
	return binary.BigEndian.AppendUint64(k, uint64(handle)^(1<<63))
}

func tableSpan(table int64) kvevent.Span {
	s := []byte{'t'}
	s = binary.BigEndian.AppendUint64(s, uint64(table)^(1<<63))
	return kvevent.Span{StartKey: codec.EncodeBytes(nil, append(append([]byte{}, s...), '_', 'r')), EndKey: codec.EncodeBytes(nil, append(append([]byte{}, s...), '_', 's'))}
}

// splitAt returns the comparable key of row handle h of table 1.
func splitAt(h int64) []byte { return codec.EncodeBytes(nil, rawKey(1, h)) }

func newTestPuller(t *testing.T, startTs uint64) (*SpanPuller, *recorder) {
	t.Helper()
	rec := &recorder{}
	p, err := NewSpanPuller(Config{Span: tableSpan(1), StartTs: startTs, Consumer: rec})
	require.NoError(t, err)
	return p, rec
}

func rowsEv(region, req uint64, rows ...*cdcpb.Event_Row) *cdcpb.Event {
	return &cdcpb.Event{RegionId: region, RequestId: req, Event: &cdcpb.Event_Entries_{Entries: &cdcpb.Event_Entries{Entries: rows}}}
}

func errEv(region, req uint64, e *cdcpb.Error) *cdcpb.Event {
	return &cdcpb.Event{RegionId: region, RequestId: req, Event: &cdcpb.Event_Error{Error: e}}
}

func prewrite(h int64, start uint64, v, old string) *cdcpb.Event_Row {
	return &cdcpb.Event_Row{Type: cdcpb.Event_PREWRITE, OpType: cdcpb.Event_Row_PUT, Key: rawKey(1, h), StartTs: start, Value: []byte(v), OldValue: []byte(old)}
}
func commit(h int64, start, cts uint64) *cdcpb.Event_Row {
	return &cdcpb.Event_Row{Type: cdcpb.Event_COMMIT, OpType: cdcpb.Event_Row_PUT, Key: rawKey(1, h), StartTs: start, CommitTs: cts}
}
func committed(h int64, start, cts uint64, v string) *cdcpb.Event_Row {
	return &cdcpb.Event_Row{Type: cdcpb.Event_COMMITTED, OpType: cdcpb.Event_Row_PUT, Key: rawKey(1, h), StartTs: start, CommitTs: cts, Value: []byte(v)}
}
func rollback(h int64, start uint64) *cdcpb.Event_Row {
	return &cdcpb.Event_Row{Type: cdcpb.Event_ROLLBACK, Key: rawKey(1, h), StartTs: start}
}
func initialized() *cdcpb.Event_Row { return &cdcpb.Event_Row{Type: cdcpb.Event_INITIALIZED} }

func resolved(ts, req uint64, regions ...uint64) *cdcpb.ResolvedTs {
	return &cdcpb.ResolvedTs{Regions: regions, Ts: ts, RequestId: req}
}

func mustHandle(t *testing.T, p *SpanPuller, ev *cdcpb.Event) {
	t.Helper()
	retry, err := p.HandleEvent(ev)
	require.NoError(t, err)
	require.Nil(t, retry)
}

// rule: LP1
func TestPrewriteCommitMatchCarriesValues(t *testing.T) {
	p, rec := newTestPuller(t, 10)
	_, err := p.AddRegion(1, 100, tableSpan(1))
	require.NoError(t, err)
	mustHandle(t, p, rowsEv(1, 100, initialized()))
	mustHandle(t, p, rowsEv(1, 100, prewrite(5, 20, "new", "old")))
	require.Empty(t, rec.rows, "a prewrite alone is not a change")
	mustHandle(t, p, rowsEv(1, 100, commit(5, 20, 21)))
	require.Equal(t, []string{"put " + string(rawKey(1, 5)) + "@21/20 v=new old=old"}, rec.log())
	require.Zero(t, p.MatcherBytes())
}

// rule: LP1
func TestFakePrewriteDoesNotOverwrite(t *testing.T) {
	p, rec := newTestPuller(t, 10)
	_, _ = p.AddRegion(1, 100, tableSpan(1))
	mustHandle(t, p, rowsEv(1, 100, initialized(), prewrite(5, 20, "real", ""), prewrite(5, 20, "", ""), commit(5, 20, 21)))
	require.Len(t, rec.rows, 1)
	require.Equal(t, "real", string(rec.rows[0].Value))
}

// rule: LP2
func TestCommitBeforeInitializedIsCachedThenMatched(t *testing.T) {
	p, rec := newTestPuller(t, 10)
	_, _ = p.AddRegion(1, 100, tableSpan(1))
	// Commit arrives before its prewrite is known: cached.
	mustHandle(t, p, rowsEv(1, 100, commit(5, 20, 21)))
	// A commit whose prewrite never shows up: dropped at INITIALIZED (the
	// scan delivered it as COMMITTED).
	mustHandle(t, p, rowsEv(1, 100, commit(6, 22, 23), committed(6, 22, 23, "scan")))
	mustHandle(t, p, rowsEv(1, 100, prewrite(5, 20, "v5", "")))
	require.Len(t, rec.rows, 1, "only the COMMITTED row so far")
	mustHandle(t, p, rowsEv(1, 100, initialized()))
	require.Len(t, rec.rows, 2)
	require.Equal(t, "v5", string(rec.rows[1].Value))
	require.Equal(t, uint64(1), p.Stats().DroppedCommits)
}

// rule: LP3
func TestCommitWithoutPrewriteAfterInitIsFatal(t *testing.T) {
	p, _ := newTestPuller(t, 10)
	_, _ = p.AddRegion(1, 100, tableSpan(1))
	mustHandle(t, p, rowsEv(1, 100, initialized()))
	_, err := p.HandleEvent(rowsEv(1, 100, commit(5, 20, 21)))
	var fe *FatalError
	require.ErrorAs(t, err, &fe)
	require.Contains(t, err.Error(), "without matching PREWRITE")
}

// rule: LP1, LP2
func TestRollbackForgetsPrewriteAndCachedRollbackAppliesAtInit(t *testing.T) {
	p, rec := newTestPuller(t, 10)
	_, _ = p.AddRegion(1, 100, tableSpan(1))
	mustHandle(t, p, rowsEv(1, 100, prewrite(5, 20, "v", ""), rollback(5, 20)))
	require.NotZero(t, p.MatcherBytes(), "rollback before INITIALIZED is cached")
	mustHandle(t, p, rowsEv(1, 100, initialized()))
	require.Zero(t, p.MatcherBytes())
	mustHandle(t, p, rowsEv(1, 100, prewrite(6, 30, "v", ""), rollback(6, 30)))
	require.Zero(t, p.MatcherBytes())
	require.Empty(t, rec.rows)
}

// rule: LP4
func TestStaleCommitAtOrBelowCheckpointDropped(t *testing.T) {
	p, rec := newTestPuller(t, 50)
	_, _ = p.AddRegion(1, 100, tableSpan(1))
	mustHandle(t, p, rowsEv(1, 100, prewrite(5, 40, "v", ""), commit(5, 40, 50), initialized()))
	require.Empty(t, rec.rows)
	require.Zero(t, p.MatcherBytes(), "the stale commit still cleans the matcher")
	require.Equal(t, uint64(1), p.Stats().StaleCommits)
}

// rule: LP2, LP6
func TestResolvedTsOnlyAfterInitializedAndOnlyIncreases(t *testing.T) {
	p, rec := newTestPuller(t, 10)
	_, _ = p.AddRegion(1, 100, tableSpan(1))
	p.HandleResolvedTs(resolved(20, 100, 1))
	require.Empty(t, rec.resolved, "resolved ts before INITIALIZED is ignored")
	mustHandle(t, p, rowsEv(1, 100, initialized()))
	p.HandleResolvedTs(resolved(20, 100, 1))
	p.HandleResolvedTs(resolved(15, 100, 1))
	p.HandleResolvedTs(resolved(20, 100, 1))
	p.HandleResolvedTs(resolved(0, 100, 1))
	p.HandleResolvedTs(resolved(25, 100, 1))
	require.Equal(t, []uint64{20, 25}, rec.resolved)
}

// rule: LP7
func TestSpanResolvedIsMinOverRegionsAndHoles(t *testing.T) {
	p, rec := newTestPuller(t, 10)
	full := tableSpan(1)
	mid := splitAt(100)
	_, err := p.AddRegion(1, 100, kvevent.Span{StartKey: full.StartKey, EndKey: mid})
	require.NoError(t, err)
	mustHandle(t, p, rowsEv(1, 100, initialized()))
	p.HandleResolvedTs(resolved(30, 100, 1))
	require.Empty(t, rec.resolved, "the right half is an unsubscribed hole at ts 10")
	require.Len(t, p.Holes(), 1)
	_, err = p.AddRegion(2, 101, kvevent.Span{StartKey: mid, EndKey: full.EndKey})
	require.NoError(t, err)
	mustHandle(t, p, rowsEv(2, 101, initialized()))
	p.HandleResolvedTs(resolved(25, 101, 2))
	require.Equal(t, []uint64{25}, rec.resolved)
	p.HandleResolvedTs(resolved(40, 101, 2))
	require.Equal(t, []uint64{25, 30}, rec.resolved)
}

// rule: LP5
func TestCommitAtOrBelowRegionResolvedIsFatal(t *testing.T) {
	p, _ := newTestPuller(t, 10)
	_, _ = p.AddRegion(1, 100, tableSpan(1))
	mustHandle(t, p, rowsEv(1, 100, initialized()))
	p.HandleResolvedTs(resolved(30, 100, 1))
	_, err := p.HandleEvent(rowsEv(1, 100, committed(5, 25, 30, "late")))
	var fe *FatalError
	require.ErrorAs(t, err, &fe)
	require.Contains(t, err.Error(), "not above the region's resolved ts 30")
}

// rule: LP8, LP9, LP10
func TestRegionErrorRetryAndDuplicateSuppression(t *testing.T) {
	p, rec := newTestPuller(t, 10)
	_, _ = p.AddRegion(1, 100, tableSpan(1))
	mustHandle(t, p, rowsEv(1, 100, initialized(), committed(5, 19, 20, "a")))
	p.HandleResolvedTs(resolved(20, 100, 1))
	mustHandle(t, p, rowsEv(1, 100, committed(6, 24, 25, "b")))
	retry, err := p.HandleEvent(errEv(1, 100, &cdcpb.Error{EpochNotMatch: &errorpb.EpochNotMatch{}}))
	require.NoError(t, err)
	require.NotNil(t, retry)
	require.Equal(t, RetryEpochNotMatch, retry.Reason)
	require.Equal(t, uint64(20), retry.Ts, "re-subscribe from the region's last resolved ts")
	require.Equal(t, tableSpan(1), retry.Span)

	// Split into two regions; the scan re-sends the row at 25.
	mid := splitAt(5)
	ts, err := p.AddRegion(2, 200, kvevent.Span{StartKey: retry.Span.StartKey, EndKey: mid})
	require.NoError(t, err)
	require.Equal(t, uint64(20), ts)
	ts, err = p.AddRegion(3, 201, kvevent.Span{StartKey: mid, EndKey: retry.Span.EndKey})
	require.NoError(t, err)
	require.Equal(t, uint64(20), ts)
	mustHandle(t, p, rowsEv(3, 201, committed(6, 24, 25, "b"), committed(7, 26, 27, "c"), initialized()))
	mustHandle(t, p, rowsEv(2, 200, initialized()))
	// Events of the old request are stale leftovers.
	mustHandle(t, p, rowsEv(1, 100, committed(8, 28, 29, "stale")))
	require.Equal(t, []string{"a", "b", "c"}, values(rec))
	require.Equal(t, uint64(1), p.Stats().Duplicates)
	require.Equal(t, uint64(1), p.Stats().StaleEvents)
	p.HandleResolvedTs(resolved(30, 200, 2))
	p.HandleResolvedTs(resolved(30, 201, 3))
	require.Equal(t, []uint64{20, 30}, rec.resolved)
}

func values(rec *recorder) []string {
	var out []string
	for _, r := range rec.rows {
		out = append(out, string(r.Value))
	}
	return out
}

// rule: LP8
func TestOverlappingAddRegionIsRejected(t *testing.T) {
	p, _ := newTestPuller(t, 10)
	_, err := p.AddRegion(1, 100, kvevent.Span{StartKey: tableSpan(1).StartKey, EndKey: splitAt(10)})
	require.NoError(t, err)
	_, err = p.AddRegion(2, 101, kvevent.Span{StartKey: splitAt(5), EndKey: tableSpan(1).EndKey})
	var le *RangeLockedError
	require.True(t, errors.As(err, &le))
	require.Equal(t, uint64(1), le.Holder)
	holes := p.Holes()
	require.Len(t, holes, 1)
	require.Equal(t, splitAt(10), holes[0].Span.StartKey)
	_, err = p.AddRegion(1, 102, kvevent.Span{StartKey: splitAt(10), EndKey: tableSpan(1).EndKey})
	require.Error(t, err, "the same region twice on one span is a duplicate request")
}

// rule: LP8
func TestFatalServerErrors(t *testing.T) {
	for name, e := range map[string]*cdcpb.Error{
		"duplicate_request":   {DuplicateRequest: &cdcpb.DuplicateRequest{RegionId: 1}},
		"compatibility":       {Compatibility: &cdcpb.Compatibility{RequiredVersion: "9.9.9"}},
		"cluster_id_mismatch": {ClusterIdMismatch: &cdcpb.ClusterIDMismatch{Current: 1, Request: 2}},
	} {
		t.Run(name, func(t *testing.T) {
			p, _ := newTestPuller(t, 10)
			_, _ = p.AddRegion(1, 100, tableSpan(1))
			_, err := p.HandleEvent(errEv(1, 100, e))
			var fe *FatalError
			require.ErrorAs(t, err, &fe)
			require.Contains(t, err.Error(), name)
		})
	}
}

// rule: LP8
func TestRetryableServerErrors(t *testing.T) {
	for want, e := range map[RetryReason]*cdcpb.Error{
		RetryNotLeader:      {NotLeader: &errorpb.NotLeader{RegionId: 1}},
		RetryRegionNotFound: {RegionNotFound: &errorpb.RegionNotFound{RegionId: 1}},
		RetryServerIsBusy:   {ServerIsBusy: &errorpb.ServerIsBusy{Reason: "too many scans"}},
		RetryCongested:      {Congested: &cdcpb.Congested{RegionId: 1}},
		RetryUnknownError:   {}, // an error kind the pinned proto does not know
	} {
		t.Run(want.String(), func(t *testing.T) {
			p, _ := newTestPuller(t, 10)
			_, _ = p.AddRegion(1, 100, tableSpan(1))
			retry, err := p.HandleEvent(errEv(1, 100, e))
			require.NoError(t, err)
			require.Equal(t, want, retry.Reason)
			require.Zero(t, p.RegionCount())
		})
	}
}

// rule: LP11
func TestMatcherQuotaFailsRegionInsteadOfGrowing(t *testing.T) {
	rec := &recorder{}
	p, err := NewSpanPuller(Config{Span: tableSpan(1), StartTs: 10, Consumer: rec, MatcherQuota: 1000})
	require.NoError(t, err)
	_, _ = p.AddRegion(1, 100, tableSpan(1))
	mustHandle(t, p, rowsEv(1, 100, initialized()))
	big := string(make([]byte, 400))
	retry, err := p.HandleEvent(rowsEv(1, 100, prewrite(1, 20, big, ""), prewrite(2, 20, big, ""), prewrite(3, 20, big, "")))
	require.NoError(t, err)
	require.NotNil(t, retry)
	require.Equal(t, RetryMatcherQuota, retry.Reason)
	require.Zero(t, p.MatcherBytes(), "the failed region's prewrites are released")
}

// rule: LP9
func TestRowsOutsideSpanAreDropped(t *testing.T) {
	p, rec := newTestPuller(t, 10)
	_, _ = p.AddRegion(1, 100, tableSpan(1))
	other := committed(5, 19, 20, "x")
	other.Key = rawKey(2, 5)
	mustHandle(t, p, rowsEv(1, 100, initialized(), other))
	require.Empty(t, rec.rows)
	require.Equal(t, uint64(1), p.Stats().OutOfSpan)
}

// rule: LP5
func TestDeleteAndUnknownOpType(t *testing.T) {
	p, rec := newTestPuller(t, 10)
	_, _ = p.AddRegion(1, 100, tableSpan(1))
	del := committed(5, 19, 20, "")
	del.OpType = cdcpb.Event_Row_DELETE
	del.OldValue = []byte("gone")
	mustHandle(t, p, rowsEv(1, 100, initialized(), del))
	require.Equal(t, kvevent.OpTypeDelete, rec.rows[0].OpType)
	require.Equal(t, "gone", string(rec.rows[0].OldValue))
	bad := committed(6, 21, 22, "")
	bad.OpType = cdcpb.Event_Row_UNKNOWN
	_, err := p.HandleEvent(rowsEv(1, 100, bad))
	require.Error(t, err)
}
