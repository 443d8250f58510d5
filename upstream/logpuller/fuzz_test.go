package logpuller

import (
	"testing"

	"github.com/pingcap/kvproto/pkg/cdcpb"
	"github.com/searchfabric/sfemu/upstream/kvevent"
)

type nopConsumer struct{ rows int }

func (n *nopConsumer) ConsumeKV(es []kvevent.RawKVEntry) { n.rows += len(es) }
func (n *nopConsumer) AdvanceResolvedTs(uint64)          {}

// FuzzSpanPuller feeds an arbitrary sequence of region subscriptions, rows,
// errors and resolved ts to the core: it must return errors, never panic,
// and keep its frontier a valid cover of the span.
func FuzzSpanPuller(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{0, 0, 5, 1, 3, 2, 7, 4, 9, 9, 9, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := NewSpanPuller(Config{Span: tableSpan(1), StartTs: 10, Consumer: &nopConsumer{}, MatcherQuota: 4096})
		if err != nil {
			t.Fatal(err)
		}
		next := func() int {
			if len(data) == 0 {
				return 0
			}
			b := data[0]
			data = data[1:]
			return int(b)
		}
		for len(data) > 0 {
			op := next() % 8
			region := uint64(next()%4 + 1)
			h := int64(next() % 16)
			ts := uint64(next())
			switch op {
			case 0:
				a, b := h, h+int64(next()%8)+1
				_, _ = p.AddRegion(region, region*10, kvevent.Span{StartKey: splitAt(a), EndKey: splitAt(b)})
			case 1:
				_, err = p.HandleEvent(rowsEv(region, region*10, initialized()))
			case 2:
				_, err = p.HandleEvent(rowsEv(region, region*10, prewrite(h, ts, "v", "o")))
			case 3:
				_, err = p.HandleEvent(rowsEv(region, region*10, commit(h, ts, ts+uint64(next()))))
			case 4:
				_, err = p.HandleEvent(rowsEv(region, region*10, committed(h, ts, ts+uint64(next()), "c")))
			case 5:
				_, err = p.HandleEvent(rowsEv(region, region*10, rollback(h, ts)))
			case 6:
				p.HandleResolvedTs(resolved(ts, region*10, region))
			case 7:
				_, err = p.HandleEvent(errEv(region, region*10, &cdcpb.Error{}))
			}
			if err != nil {
				return // fatal: the feed stops here
			}
			if cerr := p.front.check(); cerr != nil {
				t.Fatal(cerr)
			}
		}
	})
}

// BenchmarkCommittedRows measures the core's per-row cost for live 1PC rows
// (COMMITTED), delivered in events of 64 rows with a resolved ts per event.
func BenchmarkCommittedRows(b *testing.B) {
	c := &nopConsumer{}
	p, err := NewSpanPuller(Config{Span: tableSpan(1), StartTs: 10, Consumer: c})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := p.AddRegion(1, 1, tableSpan(1)); err != nil {
		b.Fatal(err)
	}
	if _, err := p.HandleEvent(rowsEv(1, 1, initialized())); err != nil {
		b.Fatal(err)
	}
	const perEvent = 64
	rows := make([]*cdcpb.Event_Row, perEvent)
	for i := range rows {
		rows[i] = committed(int64(i), 0, 0, "value-bytes-of-a-typical-row-000000000000000000000000")
	}
	ev := rowsEv(1, 1, rows...)
	rts := resolved(0, 1, 1)
	ts := uint64(20)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += perEvent {
		for _, r := range rows {
			ts++
			r.StartTs, r.CommitTs = ts-1, ts
		}
		if _, err := p.HandleEvent(ev); err != nil {
			b.Fatal(err)
		}
		rts.Ts = ts
		p.HandleResolvedTs(rts)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
