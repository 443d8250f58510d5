package logpuller

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/pingcap/kvproto/pkg/cdcpb"
	"github.com/stretchr/testify/require"

	"github.com/searchfabric/sfemu/upstream/kvevent"
)

// TestLP14_SpillingMatcherAgainstModel drives two cores with the same
// random events of two regions: prewrites (with and without values, old
// values, repeated keys), commits, rollbacks, INITIALIZED, region failures
// and re-subscriptions. The model holds every prewrite in memory; the
// subject has a memory quota of a few hundred bytes that another user
// (the reorder buffers) takes and gives back at random, and spills to an
// in-memory store. Both must deliver the same rows in the same order and
// stop with the same fatal error; the subject's quota is never passed,
// and when everything was committed it holds no memory and no run.
// The delivered set is charged to the same quota and spills too (LP17):
// the subject delivers exactly the model's rows.
// Run indexes are charged as they fit (LP18).
// rule: LP13, LP14, LP16, LP17, LP18
func TestLP14_SpillingMatcherAgainstModel(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	for round := 0; round < 60; round++ {
		runSpillModelRound(t, rng, seed, round)
	}
}

func runSpillModelRound(t *testing.T, rng *rand.Rand, seed int64, round int) {
	where := fmt.Sprintf("seed %d round %d", seed, round)
	limit := int64(150 + rng.Intn(500))
	mem := mustQuota(t, "memory-quota", limit)
	store := newMemPrewriteStore()
	var modelOut, subjOut scriptConsumer
	model, err := NewSpanPuller(Config{Span: tableSpan(1), StartTs: 10, Consumer: &modelOut, MatcherQuota: 1 << 40})
	require.NoError(t, err)
	subj, err := NewSpanPuller(Config{Span: tableSpan(1), StartTs: 10, Consumer: &subjOut,
		Matcher: MatcherMemory{Memory: mem, Store: store}})
	require.NoError(t, err)

	regions := []struct {
		id       uint64
		from, to int64
		req      uint64
	}{{id: 1, from: 0, to: 20}, {id: 2, from: 20, to: 40}}
	nextReq := uint64(100)
	add := func(i int) {
		nextReq++
		regions[i].req = nextReq
		span := kvevent.Span{StartKey: splitAt(regions[i].from), EndKey: splitAt(regions[i].to)}
		_, err := model.AddRegion(regions[i].id, nextReq, span)
		require.NoError(t, err, where)
		_, err = subj.AddRegion(regions[i].id, nextReq, span)
		require.NoError(t, err, where)
	}
	if _, err := model.AddRegion(3, 99, kvevent.Span{StartKey: tableSpan(1).StartKey, EndKey: splitAt(0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := subj.AddRegion(3, 99, kvevent.Span{StartKey: tableSpan(1).StartKey, EndKey: splitAt(0)}); err != nil {
		t.Fatal(err)
	}
	add(0)
	add(1)
	// Prewrites sent (and not yet taken) per region, so most commits match.
	type pw struct {
		startTs uint64
		h       int64
	}
	pending := map[int][]pw{}
	commitTs := uint64(1000)
	other := int64(0) // bytes the other user holds
	val := func() []byte {
		switch rng.Intn(8) {
		case 0:
			return nil
		case 1:
			return []byte{}
		}
		b := make([]byte, 1+rng.Intn(40))
		for i := range b {
			b[i] = byte('a' + rng.Intn(26))
		}
		return b
	}
	send := func(i int, rows []*cdcpb.Event_Row) bool {
		ev := func() *cdcpb.Event {
			cp := make([]*cdcpb.Event_Row, len(rows))
			for j, r := range rows {
				c := *r
				cp[j] = &c
			}
			return &cdcpb.Event{RegionId: regions[i].id, RequestId: regions[i].req, Event: &cdcpb.Event_Entries_{Entries: &cdcpb.Event_Entries{Entries: cp}}}
		}
		mr, merr := model.HandleEvent(ev())
		sr, serr := subj.HandleEvent(ev())
		require.Equal(t, modelOut.log, subjOut.log, "%s: delivered rows differ", where)
		require.Equal(t, fmt.Sprint(merr), fmt.Sprint(serr), "%s: errors differ", where)
		require.Equal(t, mr == nil, sr == nil, "%s: retries differ (%v, %v)", where, mr, sr)
		require.LessOrEqual(t, mem.Peak(), limit, "%s: memory quota passed", where)
		return merr == nil
	}
	for step := 0; step < 300; step++ {
		i := rng.Intn(2)
		r := &regions[i]
		h := r.from + rng.Int63n(r.to-r.from)
		var rows []*cdcpb.Event_Row
		switch k := rng.Intn(20); {
		case k < 8: // a batch of prewrites of one txn, keys in order or not
			startTs := uint64(20 + rng.Intn(6))
			n := 1 + rng.Intn(6)
			for j := 0; j < n; j++ {
				hh := r.from + rng.Int63n(r.to-r.from)
				row := &cdcpb.Event_Row{Type: cdcpb.Event_PREWRITE, OpType: cdcpb.Event_Row_PUT, StartTs: startTs, Key: rawKey(1, hh), Value: val()}
				if rng.Intn(3) == 0 {
					row.OldValue = val()
				}
				rows = append(rows, row)
				if !slices.Contains(pending[i], pw{startTs, hh}) {
					pending[i] = append(pending[i], pw{startTs, hh})
				}
			}
		case k < 14 && len(pending[i]) > 0: // commit what was prewritten
			n := 1 + rng.Intn(len(pending[i]))
			commitTs++
			for j := 0; j < n && len(pending[i]) > 0; j++ {
				x := rng.Intn(len(pending[i]))
				p := pending[i][x]
				pending[i] = append(pending[i][:x], pending[i][x+1:]...)
				rows = append(rows, &cdcpb.Event_Row{Type: cdcpb.Event_COMMIT, OpType: cdcpb.Event_Row_PUT, StartTs: p.startTs, CommitTs: commitTs, Key: rawKey(1, p.h)})
			}
		case k < 16 && len(pending[i]) > 0:
			x := rng.Intn(len(pending[i]))
			p := pending[i][x]
			pending[i] = append(pending[i][:x], pending[i][x+1:]...)
			rows = append(rows, &cdcpb.Event_Row{Type: cdcpb.Event_ROLLBACK, StartTs: p.startTs, Key: rawKey(1, p.h)})
		case k == 16:
			rows = append(rows, &cdcpb.Event_Row{Type: cdcpb.Event_INITIALIZED})
			if rng.Intn(20) == 0 {
				// A COMMIT nothing was prewritten for: fatal after
				// INITIALIZED (LP3) in both cores alike.
				commitTs++
				rows = append(rows, &cdcpb.Event_Row{Type: cdcpb.Event_COMMIT, OpType: cdcpb.Event_Row_PUT, StartTs: 19, CommitTs: commitTs, Key: rawKey(1, h)})
			}
		case k == 17: // the other user of the quota
			if other > 0 && rng.Intn(2) == 0 {
				mem.Release(other)
				other = 0
			} else if n := rng.Int63n(limit); mem.TryAcquire(n) {
				other += n
			}
			continue
		case k == 18 && rng.Intn(4) == 0: // the region fails and is subscribed again
			mr := model.FailRegion(r.id, RetryStreamFailure, nil)
			sr := subj.FailRegion(r.id, RetryStreamFailure, nil)
			require.Equal(t, fmt.Sprint(mr), fmt.Sprint(sr), where)
			pending[i] = nil
			add(i)
			continue
		default:
			h2 := h
			commitTs++
			rows = append(rows, &cdcpb.Event_Row{Type: cdcpb.Event_COMMITTED, OpType: cdcpb.Event_Row_PUT, StartTs: commitTs - 1, CommitTs: commitTs, Key: rawKey(1, h2), Value: val()})
		}
		if !send(i, rows) {
			return
		}
	}
	// Initialize and commit everything left: nothing may stay held.
	for i := range regions[:2] {
		rows := []*cdcpb.Event_Row{{Type: cdcpb.Event_INITIALIZED}}
		commitTs++
		for _, p := range pending[i] {
			rows = append(rows, &cdcpb.Event_Row{Type: cdcpb.Event_ROLLBACK, StartTs: p.startTs, Key: rawKey(1, p.h)})
		}
		if !send(i, rows) {
			return
		}
	}
	require.Zero(t, subj.MatcherBytes(), "%s: memory held after every prewrite was taken", where)
	require.Zero(t, store.files(), "%s: runs left after every prewrite was taken", where)
	// What stays charged is the others' and the delivered set's (LP17).
	dheld, _ := subj.DeliveredBytes()
	require.Equal(t, other+dheld+subj.IndexBytes(), mem.Used(), "%s: the matcher's charge did not go back", where)
	subj.Release()
	model.Release()
	require.Equal(t, other, mem.Used(), "%s: the span's charge did not go back at Release", where)
	require.Zero(t, store.deliveredFiles(), "%s: delivered-row runs left after Release", where)
}
