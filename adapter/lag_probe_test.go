package adapter

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/searchfabric/sfemu/emulator"
	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/normalize"
)

// The lag breakdown: every resolved ts R is stamped with the wall time it
// passes each stage of the path from the cluster's resolved-ts round to
// the collection's watermarks. R's physical part is the time the round
// took its TSO, so stage time minus phys(R) is how long the pipeline held
// R until then, and for a commit c covered first by R, phys(R) - phys(c)
// is the wait for the round itself (the tick).
const (
	stagePath   = iota // minicdc: the table path's resolved ts reached R (puller → runtime)
	stageKnown         // minicdc: every DDL through R delivered (schema store's own feed)
	stageCP            // minicdc OnCheckpoint with the global resolved ts >= R
	stageAdv           // bridge: rows <= R ingested, AdvancePartition(R) called
	stageDoc           // AdvancePartition(R) returned: document and metadata_aux applied (E51)
	stageText          // text applied_ts >= R (watcher)
	stageVector        // vector applied_ts >= R (watcher)
	stageSafe          // safe_ts >= R (watcher)
	numStages
)

var stageNames = [numStages]string{"path", "known", "cp", "adv", "doc", "text", "vector", "safe"}

type stamp struct {
	ts uint64
	at time.Time
}

// lagProbe collects the stamps; each stage's list only grows in ts.
type lagProbe struct {
	mu     sync.Mutex
	stages [numStages][]stamp
	// ingest is the time spent in the emulator's Ingest (the bridge's
	// batches), ingests the number of batches.
	ingest  time.Duration
	ingests int
}

func (p *lagProbe) add(stage int, ts uint64) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.stages[stage]
	if n := len(l); n > 0 && l[n-1].ts >= ts {
		return
	}
	p.stages[stage] = append(l, stamp{ts, now})
}

// at is when stage first reached ts or more (zero if never).
func (p *lagProbe) at(stage int, ts uint64) time.Time {
	l := p.stages[stage]
	i := sort.Search(len(l), func(i int) bool { return l[i].ts >= ts })
	if i == len(l) {
		return time.Time{}
	}
	return l[i].at
}

// minicdc.StageObserver
func (p *lagProbe) PathResolved(_ int64, ts uint64) { p.add(stagePath, ts) }
func (p *lagProbe) DDLKnown(ts uint64)              { p.add(stageKnown, ts) }

// tap is the adapter's Config.Tap: it sees checkpoints before the bridge.
func (p *lagProbe) tap() minicdc.Callback { return probeTap{p} }

type probeTap struct{ p *lagProbe }

func (probeTap) OnRowChanged(context.Context, minicdc.RowChanged) error { return nil }
func (probeTap) OnDDL(context.Context, minicdc.DDL) error               { return nil }
func (t probeTap) OnCheckpoint(_ context.Context, cp minicdc.Checkpoint) error {
	t.p.add(stageCP, cp.GlobalResolvedTs)
	return nil
}

// wrapSink is the adapter's Config.WrapSink: AdvancePartition is called
// once the bridge ingested every row at or below it, and the document
// modality counts it when it returns (E51).
func (p *lagProbe) wrapSink(s normalize.Sink) normalize.Sink {
	if rs, ok := s.(normalize.RowSink); ok {
		return probeRowSink{probeSink{s, p}, rs}
	}
	return probeSink{s, p}
}

type probeSink struct {
	normalize.Sink
	p *lagProbe
}

func (s probeSink) Ingest(ctx context.Context, b *apiv1.MutationBatch) (*apiv1.IngestResponse, error) {
	t0 := time.Now()
	r, err := s.Sink.Ingest(ctx, b)
	s.p.ingested(t0)
	return r, err
}

// probeRowSink is probeSink over a sink that takes positional batches
// (normalize.RowSink, the in-process emulator): the wrapper keeps that
// path, so the benchmark measures the batches the adapter really sends
// (a plain probeSink would turn every batch into the map form, E44).
type probeRowSink struct {
	probeSink
	rows normalize.RowSink
}

func (s probeRowSink) IngestRows(ctx context.Context, b *apiv1.MutationBatch, rows *contract.Rows) (*apiv1.IngestResponse, error) {
	t0 := time.Now()
	r, err := s.rows.IngestRows(ctx, b, rows)
	s.p.ingested(t0)
	return r, err
}

func (p *lagProbe) ingested(t0 time.Time) {
	d := time.Since(t0)
	p.mu.Lock()
	p.ingest += d
	p.ingests++
	p.mu.Unlock()
}

func (s probeSink) AdvancePartition(ctx context.Context, pp *apiv1.PartitionProgress) (*apiv1.AdvancePartitionResponse, error) {
	s.p.add(stageAdv, pp.GetResolvedTs())
	r, err := s.Sink.AdvancePartition(ctx, pp)
	if err == nil {
		s.p.add(stageDoc, pp.GetResolvedTs())
	}
	return r, err
}

// watch polls the text and vector applied_ts every millisecond until stop
// is closed (they apply on their own goroutines, E51, and announce
// nothing).
func (p *lagProbe) watch(emu *emulator.Emulator, name string, stop <-chan struct{}) {
	ctx := context.Background()
	for {
		st, err := emu.GetCollection(ctx, &apiv1.GetCollectionRequest{Name: name})
		if err == nil {
			for _, m := range st.GetModalities() {
				switch m.GetModality() {
				case apiv1.Modality_MODALITY_TEXT:
					p.add(stageText, m.GetAppliedTs())
				case apiv1.Modality_MODALITY_VECTOR:
					p.add(stageVector, m.GetAppliedTs())
				}
			}
		}
		select {
		case <-stop:
			return
		case <-time.After(time.Millisecond):
		}
	}
}

// waitSafe stamps safe_ts the way a reader sees it: a read with min_ts
// just above the last safe_ts returns as soon as the emulator announces a
// larger one (E71), so the stamp is not a polling interval late. It runs
// until stop is closed.
func (p *lagProbe) waitSafe(emu *emulator.Emulator, name string, stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-stop
		cancel()
	}()
	var safe uint64
	for ctx.Err() == nil {
		r, err := emu.GetDocument(ctx, &apiv1.GetDocumentRequest{Collection: name, PrimaryKey: "1", MinTs: safe + 1})
		if err != nil {
			continue // NOT_YET_FRESH after MaxReadWait, or not created yet
		}
		safe = r.GetReadTs()
		p.add(stageSafe, safe)
	}
}

func physTime(ts uint64) time.Time { return time.UnixMilli(int64(ts >> 18)) }

// lagReport is the per-stage distribution over commits: for commit c,
// "tick" is phys(R) - phys(c) with R the first resolved ts of the table
// path covering c (the round's own wait), and
// each stage is its stamp for c minus phys(c) (cumulative lag). "hold"
// is the per-round distribution of stage(R) - phys(R) over the rounds
// from the first commit on: how long the pipeline held a resolved ts
// until that stage.
type lagReport struct {
	commit map[string][]time.Duration
	hold   map[string][]time.Duration
}

func (p *lagProbe) report(commits []uint64) lagReport {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := lagReport{commit: map[string][]time.Duration{}, hold: map[string][]time.Duration{}}
	for _, c := range commits {
		rounds := p.stages[stagePath]
		i := sort.Search(len(rounds), func(i int) bool { return rounds[i].ts >= c })
		if i == len(rounds) {
			continue
		}
		out.commit["tick"] = append(out.commit["tick"], physTime(rounds[i].ts).Sub(physTime(c)))
		for s := range numStages {
			if at := p.at(s, c); !at.IsZero() {
				out.commit[stageNames[s]] = append(out.commit[stageNames[s]], at.Sub(physTime(c)))
			}
		}
	}
	for _, r := range p.stages[stageCP] {
		if len(commits) == 0 || r.ts < commits[0] {
			continue // startup rounds: nothing written yet
		}
		for s := range numStages {
			if at := p.at(s, r.ts); !at.IsZero() {
				out.hold[stageNames[s]] = append(out.hold[stageNames[s]], at.Sub(physTime(r.ts)))
			}
		}
	}
	return out
}

// percentile of d (sorted in place); 0 when empty.
func percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[min(len(d)-1, int(float64(len(d))*q))]
}
