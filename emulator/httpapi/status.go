package httpapi

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
)

// The status page's model (H15-H17): GET /v1/status answers a StatusDoc
// assembled from the emulator (collections, partitions), a StatusProvider
// (the upstream and the adapter, which the emulator does not know) and the
// Board's ring of samples. Timestamps (TSO) are JSON strings, as in the
// protojson answers: they do not fit a JavaScript number.

// StatusProvider supplies the parts of the status the emulator does not
// know. The binary implements it over its adapter; it must answer quickly
// (the page polls it) and never block on the adapter's work.
type StatusProvider interface {
	Status(ctx context.Context) ProviderStatus
}

// ProviderStatus is what a StatusProvider reports; every part is optional.
type ProviderStatus struct {
	Upstream *UpstreamStatus
	Adapter  *AdapterStatus
	// DDLs the adapter delivered recently, oldest first. The Board joins
	// them by ts with the schema changes it saw in the collections, which
	// carry the policy the emulator applied.
	DDLs []DDLEvent
	// Errors are the recent errors, oldest first.
	Errors []ErrorRow
}

// UpstreamStatus says what the adapter reads.
type UpstreamStatus struct {
	Mode    string `json:"mode"`    // embedded, in-process, real
	Address string `json:"address"` // PD address(es)
	// CurrentTs is the upstream's current ts; lags are measured against it
	// (0: against the local clock).
	CurrentTs uint64 `json:"current_ts,string"`
}

// Adapter states (H15).
const (
	AdapterStarting     = "starting"
	AdapterSnapshotting = "snapshotting"
	AdapterStreaming    = "streaming"
	AdapterRestarting   = "restarting"
	AdapterStopped      = "stopped"
)

// AdapterStatus is the adapter's state and counters.
type AdapterStatus struct {
	State string `json:"state"`
	// Reason is the one-line reason of a stop or restart.
	Reason       string    `json:"reason,omitempty"`
	Since        time.Time `json:"since"`
	Epoch        uint64    `json:"epoch"`
	StartTs      uint64    `json:"start_ts,string"`
	CheckpointTs uint64    `json:"checkpoint_ts,string"`
	Rows         uint64    `json:"rows"`
	DDLs         uint64    `json:"ddls"`
	Restarts     int       `json:"restarts"`
	// Buffered is rows held in the reorder buffers.
	Buffered int `json:"buffered_rows"`
	// CheckpointLag is filled by the Board (seconds behind the upstream).
	CheckpointLag *float64 `json:"checkpoint_lag_seconds,omitempty"`
	// Progress is long work in flight (a snapshot; the Board adds the
	// catch-up after a restart).
	Progress *Progress `json:"progress,omitempty"`
}

// DDLEvent is a DDL the adapter delivered.
type DDLEvent struct {
	Ts    uint64 `json:"ts,string"`
	Table string `json:"table"`
	Query string `json:"query"`
}

// ErrorRow is one recent error.
type ErrorRow struct {
	At      time.Time `json:"at"`
	Message string    `json:"message"`
}

// Progress is long work: done of total (in Unit), the rate in Unit per
// second and the time left at that rate (H17).
type Progress struct {
	What       string   `json:"what"`
	Unit       string   `json:"unit"`
	Done       float64  `json:"done"`
	Total      float64  `json:"total"`
	Rate       float64  `json:"rate"`
	ETASeconds *float64 `json:"eta_seconds,omitempty"`
}

// StatusDoc is the body of GET /v1/status.
type StatusDoc struct {
	Now         time.Time       `json:"now"`
	Upstream    *UpstreamStatus `json:"upstream,omitempty"`
	Adapter     *AdapterStatus  `json:"adapter,omitempty"`
	Collections []CollectionRow `json:"collections"`
	Partitions  []PartitionRow  `json:"partitions"`
	DDLs        []DDLRow        `json:"ddls"`
	Errors      []ErrorRow      `json:"errors"`
	Series      Series          `json:"series"`
}

// CollectionRow is one collection's line.
type CollectionRow struct {
	Name          string       `json:"name"`
	Documents     uint64       `json:"documents"`
	Tombstones    uint64       `json:"tombstones"`
	Generation    uint64       `json:"generation"`
	SchemaVersion uint64       `json:"schema_version"`
	SafeTs        uint64       `json:"safe_ts,string"`
	SafeLag       *float64     `json:"safe_lag_seconds,omitempty"` // absent while safe_ts is undefined
	Applied       []AppliedRow `json:"applied"`
	// Rebuild is a generation being built beside the serving one (E58),
	// in percent of the documents re-indexed.
	Rebuild *Progress `json:"rebuild,omitempty"`
}

// AppliedRow is one modality's applied_ts.
type AppliedRow struct {
	Modality  string   `json:"modality"`
	AppliedTs uint64   `json:"applied_ts,string"`
	Lag       *float64 `json:"lag_seconds,omitempty"`
}

// PartitionRow is one source partition's stored progress.
type PartitionRow struct {
	SourcePartition string   `json:"source_partition"`
	Collection      string   `json:"collection"`
	Epoch           uint64   `json:"epoch"`
	LastSeq         uint64   `json:"last_seq"`
	ResolvedTs      uint64   `json:"resolved_ts,string"`
	Lag             *float64 `json:"lag_seconds,omitempty"`
}

// DDLRow is a schema change: the collection whose schema it changed, with
// the policy the emulator applied, and the statement when the adapter
// reported it.
type DDLRow struct {
	Ts            uint64    `json:"ts,string"`
	Collection    string    `json:"collection,omitempty"`
	Policy        string    `json:"policy,omitempty"`
	SchemaVersion uint64    `json:"schema_version,omitempty"`
	Generation    uint64    `json:"generation,omitempty"`
	Table         string    `json:"table,omitempty"`
	Query         string    `json:"query,omitempty"`
	SeenAt        time.Time `json:"seen_at"`
}

// Series is the live plot's data.
type Series struct {
	WindowSeconds float64 `json:"window_seconds"`
	EverySeconds  float64 `json:"every_seconds"`
	Points        []Point `json:"points"`
}

// BoardConfig configures NewBoard.
type BoardConfig struct {
	Backend  Backend
	Provider StatusProvider // nil: no upstream or adapter parts
	// Gatherer holds sfemu_ingest_mutations_total, the plotted rows.
	Gatherer prometheus.Gatherer
	Window   time.Duration // plotted window; 0 means 15 minutes
	Every    time.Duration // sampling period; 0 means 1 s
	MaxDDLs  int           // DDL rows kept; 0 means 20
}

// Board samples the status for the live plot and assembles StatusDocs.
type Board struct {
	cfg BoardConfig

	mu      sync.Mutex
	ring    *Ring
	lineage map[string]lineageKey // last lineage seen per collection
	ddls    []DDLRow              // oldest first, at most MaxDDLs
	catch   catchUp
	rebuild map[string]*rebuildRate // per collection
}

// rebuildRate follows one rebuild's percent between samples.
type rebuildRate struct {
	generation uint64
	at         time.Time
	percent    float64
	rate       float64 // percent per second, smoothed
}

func (r *rebuildRate) observe(gen uint64, pct float64, now time.Time) {
	if gen != r.generation {
		*r = rebuildRate{generation: gen, at: now, percent: pct}
		return
	}
	if dt := now.Sub(r.at).Seconds(); dt > 0 && pct >= r.percent {
		x := (pct - r.percent) / dt
		if r.rate == 0 {
			r.rate = x
		} else {
			r.rate = 0.7*r.rate + 0.3*x
		}
	}
	r.at, r.percent = now, pct
}

type lineageKey struct{ version, ddlTs, generation uint64 }

// NewBoard returns a Board; Run samples it.
func NewBoard(cfg BoardConfig) *Board {
	if cfg.Window <= 0 {
		cfg.Window = 15 * time.Minute
	}
	if cfg.Every <= 0 {
		cfg.Every = time.Second
	}
	if cfg.MaxDDLs <= 0 {
		cfg.MaxDDLs = 20
	}
	n := int(cfg.Window/cfg.Every) + 2
	return &Board{cfg: cfg, ring: NewRing(n), lineage: map[string]lineageKey{}, rebuild: map[string]*rebuildRate{}}
}

// Run samples every cfg.Every until ctx ends.
func (b *Board) Run(ctx context.Context) {
	t := time.NewTicker(b.cfg.Every)
	defer t.Stop()
	for {
		_ = b.Sample(ctx, time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sample takes one sample at now: rows, lags, new schema changes and the
// catch-up's rate.
func (b *Board) Sample(ctx context.Context, now time.Time) error {
	var ps ProviderStatus
	if b.cfg.Provider != nil {
		ps = b.cfg.Provider.Status(ctx)
	}
	list, err := b.cfg.Backend.ListCollections(ctx, &apiv1.ListCollectionsRequest{})
	if err != nil {
		return err
	}
	upTs := upstreamTs(ps, now)
	s := Sample{At: now, Rows: ingestedRows(b.cfg.Gatherer), SafeLag: map[string]float64{}}
	for _, c := range list.GetCollections() {
		if l := lagSeconds(upTs, c.GetSafeTs()); l != nil {
			s.SafeLag[c.GetDefinition().GetName()] = *l
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ring.Add(s)
	b.noteLineage(list.GetCollections(), now)
	for _, c := range list.GetCollections() {
		name, rb := c.GetDefinition().GetName(), c.GetRebuild()
		if rb == nil {
			delete(b.rebuild, name)
			continue
		}
		r := b.rebuild[name]
		if r == nil {
			r = &rebuildRate{}
			b.rebuild[name] = r
		}
		r.observe(rb.GetGeneration(), float64(rb.GetPercent()), now)
	}
	if a := ps.Adapter; a != nil {
		b.catch.observe(a.Epoch, a.StartTs, a.CheckpointTs, upTs, now)
	}
	return nil
}

// noteLineage records a DDL row for every collection whose lineage moved
// since the last sample (and, on the first sample, each collection's last
// schema change). Two changes of one collection within one sampling period
// show as the later one.
func (b *Board) noteLineage(cols []*apiv1.CollectionStatus, now time.Time) {
	for _, c := range cols {
		name, l := c.GetDefinition().GetName(), c.GetLineage()
		k := lineageKey{l.GetSchemaVersion(), l.GetLastDdlCommitTs(), l.GetGeneration()}
		if old, ok := b.lineage[name]; (ok && old == k) || k == (lineageKey{}) {
			continue
		}
		b.lineage[name] = k
		b.ddls = append(b.ddls, DDLRow{
			Ts: k.ddlTs, Collection: name, Policy: l.GetLastUpdatePolicy().String(),
			SchemaVersion: k.version, Generation: k.generation, SeenAt: now,
		})
	}
	sort.SliceStable(b.ddls, func(i, j int) bool { return b.ddls[i].Ts < b.ddls[j].Ts })
	if over := len(b.ddls) - b.cfg.MaxDDLs; over > 0 {
		b.ddls = append([]DDLRow(nil), b.ddls[over:]...)
	}
}

// Status assembles the StatusDoc at now.
func (b *Board) Status(ctx context.Context, now time.Time) (*StatusDoc, error) {
	var ps ProviderStatus
	if b.cfg.Provider != nil {
		ps = b.cfg.Provider.Status(ctx)
	}
	list, err := b.cfg.Backend.ListCollections(ctx, &apiv1.ListCollectionsRequest{})
	if err != nil {
		return nil, err
	}
	prog, err := b.cfg.Backend.GetProgress(ctx, &apiv1.GetProgressRequest{})
	if err != nil {
		return nil, err
	}
	upTs := upstreamTs(ps, now)
	doc := &StatusDoc{Now: now, Upstream: ps.Upstream, Collections: []CollectionRow{}, Partitions: []PartitionRow{}, Errors: ps.Errors}
	if doc.Errors == nil {
		doc.Errors = []ErrorRow{}
	}
	for _, c := range list.GetCollections() {
		row := CollectionRow{
			Name: c.GetDefinition().GetName(), Documents: c.GetDocCount(), Tombstones: c.GetTombstoneCount(),
			Generation: c.GetLineage().GetGeneration(), SchemaVersion: c.GetLineage().GetSchemaVersion(),
			SafeTs: c.GetSafeTs(), SafeLag: lagSeconds(upTs, c.GetSafeTs()), Applied: []AppliedRow{},
		}
		for _, m := range c.GetModalities() {
			row.Applied = append(row.Applied, AppliedRow{Modality: contract.ModalityName(m.GetModality()), AppliedTs: m.GetAppliedTs(), Lag: lagSeconds(upTs, m.GetAppliedTs())})
		}
		doc.Collections = append(doc.Collections, row)
	}
	sort.Slice(doc.Collections, func(i, j int) bool { return doc.Collections[i].Name < doc.Collections[j].Name })
	for _, p := range prog.GetPartitions() {
		doc.Partitions = append(doc.Partitions, PartitionRow{
			SourcePartition: p.GetSourcePartition(), Collection: p.GetCollection(), Epoch: p.GetSourceEpoch(),
			LastSeq: p.GetLastSeq(), ResolvedTs: p.GetResolvedTs(), Lag: lagSeconds(upTs, p.GetResolvedTs()),
		})
	}
	sort.Slice(doc.Partitions, func(i, j int) bool {
		a, c := doc.Partitions[i], doc.Partitions[j]
		if a.Collection != c.Collection {
			return a.Collection < c.Collection
		}
		return a.SourcePartition < c.SourcePartition
	})

	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range list.GetCollections() {
		rb := c.GetRebuild()
		if rb == nil {
			continue
		}
		rate := 0.0
		if r := b.rebuild[c.GetDefinition().GetName()]; r != nil && r.generation == rb.GetGeneration() {
			rate = r.rate
		}
		for j := range doc.Collections {
			if doc.Collections[j].Name == c.GetDefinition().GetName() {
				doc.Collections[j].Rebuild = NewProgress(fmt.Sprintf("rebuild of generation %d (serving %d)", rb.GetGeneration(), rb.GetServingGeneration()), "%", float64(rb.GetPercent()), 100, rate)
			}
		}
	}
	doc.Series = Series{WindowSeconds: b.cfg.Window.Seconds(), EverySeconds: b.cfg.Every.Seconds(), Points: b.ring.Points(now, b.cfg.Window)}
	if doc.Series.Points == nil {
		doc.Series.Points = []Point{}
	}
	doc.DDLs = joinDDLs(b.ddls, ps.DDLs, b.cfg.MaxDDLs)
	if ps.Adapter != nil {
		a := *ps.Adapter
		a.CheckpointLag = lagSeconds(upTs, a.CheckpointTs)
		if a.Progress == nil && a.State == AdapterStreaming {
			a.Progress = b.catch.progress(a.Epoch, a.StartTs, a.CheckpointTs)
		}
		doc.Adapter = &a
	}
	return doc, nil
}

// joinDDLs lists the schema changes seen in the collections, each with the
// statement the adapter reported at the same ts, plus the reported DDLs
// that changed no collection; newest first, at most max rows.
func joinDDLs(seen []DDLRow, reported []DDLEvent, max int) []DDLRow {
	byTs := map[uint64][]DDLEvent{}
	for _, e := range reported {
		byTs[e.Ts] = append(byTs[e.Ts], e)
	}
	used := map[uint64]bool{}
	out := make([]DDLRow, 0, len(seen)+len(reported))
	for _, r := range seen {
		if evs := byTs[r.Ts]; len(evs) > 0 {
			r.Table, r.Query = evs[0].Table, evs[0].Query
			used[r.Ts] = true
		}
		out = append(out, r)
	}
	for _, e := range reported {
		if !used[e.Ts] {
			out = append(out, DDLRow{Ts: e.Ts, Table: e.Table, Query: e.Query})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Ts > out[j].Ts })
	if len(out) > max {
		out = out[:max]
	}
	return out
}

// catchUp follows one adapter run (epoch) from its start ts to the
// upstream ts seen when the run was first observed: the backlog a restart
// has to replay.
type catchUp struct {
	epoch, startTs, targetTs uint64
	lastAt                   time.Time
	lastCp                   uint64
	rate                     float64 // upstream ms replayed per second
}

func (c *catchUp) observe(epoch, startTs, cp, upTs uint64, now time.Time) {
	if epoch != c.epoch || startTs != c.startTs {
		*c = catchUp{epoch: epoch, startTs: startTs, targetTs: upTs, lastAt: now, lastCp: cp}
		return
	}
	if dt := now.Sub(c.lastAt).Seconds(); dt > 0 && cp >= c.lastCp {
		r := float64(physMs(cp)-physMs(c.lastCp)) / dt
		if c.rate == 0 {
			c.rate = r
		} else {
			c.rate = 0.7*c.rate + 0.3*r // smooth the per-second jitter
		}
	}
	c.lastAt, c.lastCp = now, cp
}

// progress is the catch-up of this run while its checkpoint is below the
// target; nil once caught up (or for another run).
func (c *catchUp) progress(epoch, startTs, cp uint64) *Progress {
	if epoch != c.epoch || startTs != c.startTs || c.targetTs <= startTs || cp >= c.targetTs {
		return nil
	}
	done := 0.0
	if cp > startTs {
		done = float64(physMs(cp)-physMs(startTs)) / 1000
	}
	return NewProgress("catch-up", "s", done, float64(physMs(c.targetTs)-physMs(startTs))/1000, c.rate/1000)
}

// NewProgress is done of total at rate units per second, with the ETA
// when the rate is positive.
func NewProgress(what, unit string, done, total, rate float64) *Progress {
	p := &Progress{What: what, Unit: unit, Done: done, Total: total, Rate: rate}
	if rate > 0 && total >= done {
		eta := (total - done) / rate
		p.ETASeconds = &eta
	}
	return p
}

// Line is the progress as one terminal line (H17): what, percent, done of
// total, rate and ETA.
func (p *Progress) Line() string {
	pct := 0.0
	if p.Total > 0 {
		pct = 100 * p.Done / p.Total
	}
	s := fmt.Sprintf("%s %.0f%% (%s/%s) at %s/s", p.What, pct, fmtAmount(p.Done, p.Unit), fmtAmount(p.Total, p.Unit), fmtAmount(p.Rate, p.Unit))
	if p.ETASeconds != nil {
		s += " ETA " + (time.Duration(*p.ETASeconds * float64(time.Second))).Round(time.Second).String()
	} else {
		s += " ETA unknown"
	}
	return s
}

func fmtAmount(v float64, unit string) string {
	switch unit {
	case "s":
		return fmt.Sprintf("%.1fs", v)
	case "%":
		return fmt.Sprintf("%.0f%%", v)
	}
	return fmt.Sprintf("%.0f %s", v, unit)
}

func physMs(ts uint64) uint64 { return ts >> 18 }

// upstreamTs is the ts lags are measured against: the upstream's current
// ts, or the local clock as a TSO.
func upstreamTs(ps ProviderStatus, now time.Time) uint64 {
	if ps.Upstream != nil && ps.Upstream.CurrentTs != 0 {
		return ps.Upstream.CurrentTs
	}
	return uint64(now.UnixMilli()) << 18
}

// lagSeconds is how far ts trails now (physical time), nil while ts is
// undefined (0). A ts ahead of now is 0 behind.
func lagSeconds(now, ts uint64) *float64 {
	if ts == 0 {
		return nil
	}
	l := 0.0
	if physMs(now) > physMs(ts) {
		l = float64(physMs(now)-physMs(ts)) / 1000
	}
	return &l
}

// ingestedRows sums sfemu_ingest_mutations_total in g (0 without it).
func ingestedRows(g prometheus.Gatherer) uint64 {
	if g == nil {
		return 0
	}
	mfs, _ := g.Gather() // a partial gather still counts what it has
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "sfemu_ingest_mutations_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			total += m.GetCounter().GetValue()
		}
	}
	return uint64(total)
}
