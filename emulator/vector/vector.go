// Package vector is the emulator's vector modality: k-nearest-neighbour
// search over one fixed-dimension vector field, by cosine or Euclidean (L2)
// distance.
//
// Every vector lives in a flat slab that is always exact-searchable; Upsert
// and Delete touch only the slab (rule VEC-G1), so the apply path costs a
// copy, never a graph insert. Once an index holds at least
// Options.HNSWThreshold live vectors and has been searched (or at once with
// Options.Eager), a background builder inserts the slab's vectors into an
// HNSW graph (hnsw.go; github.com/coder/hnsw was evaluated and rejected for
// low recall). A search takes the graph's candidates and scans the
// not-yet-indexed tail exactly, re-ranking both with exact distances, so it
// sees every vector upserted before it whatever the builder's progress
// (VEC-G2). The graph never unlinks nodes: a delete or a replacement only
// tombstones the node, results skip tombstones, and the builder rebuilds the
// graph from its live nodes when tombstones exceed a quarter of them.
// Falling back to the exact scan whenever graph and tail cannot produce k
// live, filter-passing results keeps answers complete.
//
// Distances (rule VEC-M1..VEC-M3 in specs/emulator-text-vector.md):
//   - Cosine: vectors are normalized on insert (a zero vector is rejected);
//     Distance = 1 - cos(q, v) in [0, 2], Score = cos(q, v).
//   - L2: Distance = ||q - v||, Score = 1 / (1 + Distance).
//
// Results are ordered by (Distance asc, PK asc).
//
// The index lives in memory, charged to an optional Quota; past the quota
// its vectors move to an unlinked spill file and searches become exact
// scans over it (rule VEC-Q1). The emulator rebuilds it from its document
// store on start (rule VEC-P1). An Index is safe for concurrent use.
package vector

import (
	"fmt"
	"math"
	"strings"
)

// Metric is the distance used to rank neighbours.
type Metric int

const (
	// Cosine ranks by cosine similarity (distance 1 - cos).
	Cosine Metric = iota + 1
	// L2 ranks by Euclidean distance.
	L2
)

func (m Metric) String() string {
	switch m {
	case Cosine:
		return "cosine"
	case L2:
		return "l2"
	}
	return fmt.Sprintf("Metric(%d)", int(m))
}

// ParseMetric accepts "cosine", "l2" (also "euclidean"), case-insensitively.
func ParseMetric(s string) (Metric, error) {
	switch strings.ToLower(s) {
	case "cosine", "cos":
		return Cosine, nil
	case "l2", "euclidean":
		return L2, nil
	}
	return 0, fmt.Errorf("vector: unknown metric %q (want cosine or l2)", s)
}

// Hit is one neighbour.
type Hit struct {
	PK       string
	Distance float64
	Score    float64
}

// Options tune the index. Zero values take the defaults.
type Options struct {
	// HNSWThreshold is the live vector count at which the HNSW graph is built
	// (default 10000). The graph is dropped again when the count falls below
	// half of it. A negative value disables HNSW.
	HNSWThreshold int
	// M is the HNSW neighbour count per node (default 16).
	M int
	// EfSearch is the HNSW candidate list size during search (default 100);
	// a query for k neighbours explores max(EfSearch, 2k) candidates.
	EfSearch int
	// EfConstruction is the HNSW candidate list size while inserting
	// (default DefaultEfConstruction).
	EfConstruction int
	// Seed seeds HNSW level generation (default 1), for reproducible graphs.
	Seed int64
	// Eager starts the graph build as soon as the index reaches
	// HNSWThreshold; by default the build waits for the first graph-eligible
	// search (VEC-G3), so an index nobody searches costs no graph CPU.
	Eager bool
	// Quota, when set, is charged with the index's memory (Bytes); past
	// its limit the index spills its vectors to a file in SpillDir and
	// drops its graph (rule VEC-Q1). Nil: no bound.
	Quota *Quota
	// SpillDir is where a spilled index keeps its vectors (default: the
	// system's temporary directory).
	SpillDir string
	// OnSpill, when set, is called (under the index lock) when the index
	// spills (err nil) or fails to (err says why; it stays in memory).
	OnSpill func(err error)
	// OnArm, when set, is called once (without locks) when a search or
	// Arm first enables the graph build of an index not built Eager: the
	// emulator records that the collection was searched (VEC-G5).
	OnArm func()
}

// DefaultEfConstruction is the construction beam (VEC-H3).
const DefaultEfConstruction = 40

func (o Options) withDefaults() Options {
	if o.HNSWThreshold == 0 {
		o.HNSWThreshold = 10000
	}
	if o.M <= 0 {
		o.M = 16
	}
	if o.EfSearch <= 0 {
		o.EfSearch = 100
	}
	if o.EfConstruction <= 0 {
		o.EfConstruction = DefaultEfConstruction
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	return o
}

// check validates v (what names it in errors) and returns its squared norm.
func (x *Index) check(what func() string, v []float32) (float64, error) {
	if len(v) != x.dim {
		return 0, fmt.Errorf("vector: %s has dimension %d, index dimension is %d", what(), len(v), x.dim)
	}
	var norm float64
	for i, f := range v {
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return 0, fmt.Errorf("vector: %s component %d is %v (must be finite)", what(), i, f)
		}
		norm += float64(f) * float64(f)
	}
	if x.metric == Cosine && norm == 0 {
		return 0, fmt.Errorf("vector: %s is the zero vector, which has no cosine direction", what())
	}
	return norm, nil
}

// store writes the stored form of a checked v into dst: a copy, normalized
// for cosine.
func (x *Index) store(dst, v []float32, norm float64) {
	copy(dst, v)
	if x.metric == Cosine {
		inv := 1 / math.Sqrt(norm)
		for i := range dst {
			dst[i] = float32(float64(dst[i]) * inv)
		}
	}
}

// prepare validates v and returns its stored form.
func (x *Index) prepare(what string, v []float32) ([]float32, error) {
	norm, err := x.check(func() string { return what }, v)
	if err != nil {
		return nil, err
	}
	out := make([]float32, x.dim)
	x.store(out, v, norm)
	return out, nil
}

func (x *Index) checkQuery(q []float32, k int) ([]float32, error) {
	if err := checkK(k); err != nil {
		return nil, err
	}
	return x.prepare("query vector", q)
}

func checkK(k int) error {
	if k <= 0 {
		return fmt.Errorf("vector: k must be positive, got %d", k)
	}
	return nil
}
