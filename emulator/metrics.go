package emulator

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/searchfabric/sfemu/emulator/contract"
)

// metrics are the emulator's Prometheus collectors (issue 4 item 7):
// ingest rows, batch latency, rejections by reason, and per-collection
// watermarks with their lag behind the clock.
type metrics struct {
	mutations  *prometheus.CounterVec
	batches    *prometheus.CounterVec
	batchSecs  prometheus.Histogram
	rejections *prometheus.CounterVec
}

func (e *Emulator) initMetrics() error {
	reg := e.opts.Registerer
	if reg == nil {
		e.registry = prometheus.NewRegistry()
		reg = e.registry
	}
	m := &metrics{
		mutations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sfemu_ingest_mutations_total",
			Help: "Mutations in admitted batches, by collection and effect (applied, stale).",
		}, []string{"collection", "effect"}),
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sfemu_ingest_batches_total",
			Help: "Ingest batches by collection and outcome (applied, replay_noop).",
		}, []string{"collection", "outcome"}),
		batchSecs: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sfemu_ingest_batch_seconds",
			Help:    "Latency of admitted ingest batches including the durable commit.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sfemu_rejections_total",
			Help: "Rejected requests by operation and contract reason.",
		}, []string{"op", "reason"}),
	}
	// Every operation starts with a zero series per reason, so the family
	// is in the first scrape (H12) and rate() sees the first rejection.
	for _, op := range rejectOps {
		for _, r := range contractReasons {
			m.rejections.WithLabelValues(op, string(r))
		}
	}
	for _, c := range []prometheus.Collector{m.mutations, m.batches, m.batchSecs, m.rejections, &watermarkCollector{e: e}} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	e.metrics = m
	return nil
}

// rejectOps are the op labels of sfemu_rejections_total (the e.reject
// call sites).
var rejectOps = []string{"advance_partition", "get_collection", "get_document", "ingest", "put_collection_schema", "search"}

// contractReasons are contract's Reason constants (a test keeps the list
// complete).
var contractReasons = []contract.Reason{
	contract.ReasonInvalidMeta, contract.ReasonInvalidDefinition, contract.ReasonUnspecifiedPolicy,
	contract.ReasonInvalidZeroState, contract.ReasonInvalidBatch, contract.ReasonInvalidMutation,
	contract.ReasonUnknownField, contract.ReasonTypeMismatch, contract.ReasonPrimaryKeyMismatch,
	contract.ReasonInvalidQuery, contract.ReasonInvalidArgument, contract.ReasonCollectionNotFound,
	contract.ReasonAlreadyExists, contract.ReasonIdempotencyConflict, contract.ReasonPartitionConflict,
	contract.ReasonFenceMismatch, contract.ReasonNonMonotonicSchema, contract.ReasonPolicyTooWeak,
	contract.ReasonPartitionNotMapped, contract.ReasonEpochRegression, contract.ReasonSeqGap,
	contract.ReasonSeqOverlap, contract.ReasonStaleGeneration, contract.ReasonProgressRegression,
	contract.ReasonLateMutation, contract.ReasonNotYetFresh, contract.ReasonClosed, contract.ReasonInternal,
}

// Registry returns the private registry the emulator registered its
// collectors in, or nil when Options.Registerer was given.
func (e *Emulator) Registry() *prometheus.Registry { return e.registry }

func (e *Emulator) reject(op string, err error) error {
	if err != nil {
		r := contract.ReasonOf(err)
		if r == "" {
			r = contract.ReasonInternal
		}
		e.metrics.rejections.WithLabelValues(op, string(r)).Inc()
	}
	return err
}

var (
	descApplied    = prometheus.NewDesc("sfemu_collection_applied_ts", "applied_ts per collection and modality (E51); 0 while undefined.", []string{"collection", "modality"}, nil)
	descAppliedLag = prometheus.NewDesc("sfemu_collection_applied_lag_seconds", "Clock minus the physical time of applied_ts.", []string{"collection", "modality"}, nil)
	descSafe       = prometheus.NewDesc("sfemu_collection_safe_ts", "safe_ts per collection (E52); 0 while undefined.", []string{"collection"}, nil)
	descSafeLag    = prometheus.NewDesc("sfemu_collection_safe_lag_seconds", "Clock minus the physical time of safe_ts.", []string{"collection"}, nil)
	descDocs       = prometheus.NewDesc("sfemu_collection_documents", "Live documents per collection.", []string{"collection"}, nil)
	descFailed     = prometheus.NewDesc("sfemu_modality_failed", "1 when an asynchronous modality stopped on an index error (its applied_ts no longer advances, E51a).", []string{"collection", "modality"}, nil)
	descRebuilding = prometheus.NewDesc("sfemu_collection_rebuilding", "1 while a generation is built beside the serving one (E58).", []string{"collection"}, nil)
	descRebuildPct = prometheus.NewDesc("sfemu_collection_rebuild_percent", "Share of the documents the rebuilding generation has re-indexed, 0..100 (0 when not rebuilding).", []string{"collection"}, nil)
	descTextMemory = prometheus.NewDesc("sfemu_text_memory_bytes", "Accounted bytes of the serving text index per collection and engine (TXT-M6): memory = in the heap, bleve = spilled to disk past Options.TextMemoryBudget (TXT-M7), where it reads 0.", []string{"collection", "engine"}, nil)
	descGeneration = prometheus.NewDesc("sfemu_collection_generation", "Lineage generation per collection: role newest is the latest schema generation, serving the one answering searches (they differ while rebuilding).", []string{"collection", "role"}, nil)
)

type watermarkCollector struct{ e *Emulator }

func (w *watermarkCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descApplied, descAppliedLag, descSafe, descSafeLag, descDocs, descFailed, descRebuilding, descRebuildPct, descGeneration, descTextMemory} {
		ch <- d
	}
}

func (w *watermarkCollector) Collect(ch chan<- prometheus.Metric) {
	e := w.e
	now := e.opts.Clock.Now()
	lag := func(ts uint64) float64 {
		if ts == 0 {
			return 0
		}
		return now.Sub(tsoTime(ts)).Seconds()
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	for _, name := range sortedKeys(e.colls) {
		c := e.colls[name]
		if !c.active() {
			continue
		}
		// Watermarks are the serving generation's and safe_ts the held
		// one (E56), so a rebuild never shows as a lag from 0.
		g := c.serving()
		for _, m := range g.mods {
			mn := contract.ModalityName(m)
			a, _ := g.wm.Applied(mn)
			ch <- prometheus.MustNewConstMetric(descApplied, prometheus.GaugeValue, float64(a), name, mn)
			ch <- prometheus.MustNewConstMetric(descAppliedLag, prometheus.GaugeValue, lag(a), name, mn)
		}
		s := e.safeLocked(c)
		ch <- prometheus.MustNewConstMetric(descSafe, prometheus.GaugeValue, float64(s), name)
		ch <- prometheus.MustNewConstMetric(descSafeLag, prometheus.GaugeValue, lag(s), name)
		ch <- prometheus.MustNewConstMetric(descDocs, prometheus.GaugeValue, float64(c.docs.Live()), name)
		rb := rebuildLocked(c)
		ch <- prometheus.MustNewConstMetric(descRebuilding, prometheus.GaugeValue, b2f(rb != nil), name)
		ch <- prometheus.MustNewConstMetric(descRebuildPct, prometheus.GaugeValue, float64(rb.GetPercent()), name)
		ch <- prometheus.MustNewConstMetric(descGeneration, prometheus.GaugeValue, float64(c.rec.GetLineage().GetGeneration()), name, "newest")
		ch <- prometheus.MustNewConstMetric(descGeneration, prometheus.GaugeValue, float64(g.rec.GetLineage().GetGeneration()), name, "serving")
		if slot, ok := g.textIdx.(*textSlot); ok {
			eng, b := slot.engineName()
			ch <- prometheus.MustNewConstMetric(descTextMemory, prometheus.GaugeValue, float64(b), name, eng)
		}
		for _, w := range []*asyncIndex{c.textW, c.vecW} {
			if w == nil {
				continue
			}
			failed := 0.0
			if w.lastErr() != nil {
				failed = 1
			}
			ch <- prometheus.MustNewConstMetric(descFailed, prometheus.GaugeValue, failed, name, w.modality)
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
