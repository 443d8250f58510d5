package emulator

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/vector"
)

// defaultVectorMemoryBudget is Options.VectorMemoryBudget's default: at
// about 100 B a 4-dim vector and 1.6 KiB a 128-dim one with its graph
// (VEC-G4), about 10M small or 650k 128-dim vectors, counted once for the
// serving generation and once for a rebuild's new one.
const defaultVectorMemoryBudget = 1 << 30

// searchedFile, in the emulator's directory, lists the collections whose
// vector index has been searched (VEC-G5), so their graphs are built from
// the start after a restart instead of after the first search.
const searchedFile = "vector-searched.json"

// vectorState is what the vector indexes of all collections share: the
// memory quota (VEC-Q1), where spills go, and the searched set (VEC-G5).
type vectorState struct {
	quota    *vector.Quota // nil: no budget
	spillDir string
	path     string // searchedFile's path; "" in memory mode
	logf     func(format string, args ...any)

	mu       sync.Mutex
	searched map[string]bool
}

func newVectorState(dir string, o Options) *vectorState {
	s := &vectorState{spillDir: o.VectorSpillDir, logf: o.Logf, searched: map[string]bool{}}
	if o.VectorMemoryBudget > 0 {
		s.quota = vector.NewQuota(o.VectorMemoryBudget)
	}
	if dir == "" {
		return s
	}
	if s.spillDir == "" {
		s.spillDir = filepath.Join(dir, "vector-spill")
	}
	s.path = filepath.Join(dir, searchedFile)
	b, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return s
	}
	var names []string
	if err == nil {
		err = json.Unmarshal(b, &names)
	}
	if err != nil { // advisory: the graphs then wait for a first search
		s.logf("emulator: ignoring %s (%v): vector graphs will be built at each collection's first search", s.path, err)
		return s
	}
	for _, n := range names {
		s.searched[n] = true
	}
	return s
}

func (s *vectorState) wasSearched(coll string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.searched[coll]
}

// markSearched records that coll's vector index was searched, writing the
// set (replace by rename) the first time only. It is advisory: a lost
// write only means the graph waits for the first search after a restart.
func (s *vectorState) markSearched(coll string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.searched[coll] {
		return
	}
	s.searched[coll] = true
	if s.path == "" {
		return
	}
	names := make([]string, 0, len(s.searched))
	for n := range s.searched {
		names = append(names, n)
	}
	sort.Strings(names)
	b, _ := json.Marshal(names)
	tmp := s.path + ".tmp"
	err := os.WriteFile(tmp, b, 0o600)
	if err == nil {
		err = os.Rename(tmp, s.path)
	}
	if err != nil {
		s.logf("emulator: recording that %s was vector-searched in %s: %v", coll, s.path, err)
	}
}

// closeVectors stops the graph builders of old's vector indexes (VEC-G3)
// and returns their memory charge (VEC-Q1), unless a generation in keep
// shares them (an index reused across an ADDITIVE change): a retired
// index gets no more writes, and building its graph would only take CPU
// from the generation that replaced it. wait blocks until the builders
// have stopped (Close), which takes at most one vector insert per
// builder; retiring does not wait.
func closeVectors(old *collection, keep []*collection, wait bool) {
	if old == nil || old.vecW == nil || keptWorker(old.vecW, keep) {
		return
	}
	for _, vf := range old.vecFields {
		if wait {
			vf.idx.Close()
		} else {
			go vf.idx.Close()
		}
	}
}

// vectorOptions are the vector package's options for a new generation's
// indexes of def. Its graphs are built at once (Eager) when the emulator
// is eager, when a vector index of a generation it replaces has been
// searched (the new generation's graph then builds during the rebuild, so
// searches after the swap find it, VEC-G3), or when the collection was
// searched before the emulator last stopped (VEC-G5). Every index is
// charged to the emulator's vector quota (VEC-Q1).
func (e *Emulator) vectorOptions(def *apiv1.CollectionDefinition, prev *collection) vector.Options {
	name := def.GetName()
	o := vector.Options{HNSWThreshold: e.opts.VectorHNSWThreshold, Eager: e.opts.VectorGraphEager,
		Quota: e.vec.quota, SpillDir: e.vec.spillDir, OnArm: func() { e.vec.markSearched(name) }}
	o.Eager = o.Eager || e.vec.wasSearched(name)
	for g := prev; g != nil && !o.Eager; g = g.prevGen {
		for _, vf := range g.vecFields {
			o.Eager = o.Eager || vf.idx.Armed()
		}
	}
	return o
}

// newVectorFields opens the indexes of def's VECTOR fields.
func (e *Emulator) newVectorFields(def *apiv1.CollectionDefinition, prev *collection) ([]*vectorField, error) {
	opts := e.vectorOptions(def, prev)
	var out []*vectorField
	for _, f := range def.GetFields() {
		if f.GetRole() != apiv1.FieldRole_FIELD_ROLE_VECTOR {
			continue
		}
		o := opts
		where := def.GetName() + "." + f.GetName()
		o.OnSpill = func(err error) {
			if err != nil {
				e.logf("emulator: vector index %s stays in memory over the vector memory budget: %v", where, err)
				return
			}
			e.logf("emulator: vector index %s passed the vector memory budget (%d bytes): its vectors moved to a spill file in %s and its graph was dropped; searches scan the file exactly until the collection's next rebuild or restart",
				where, e.vec.quota.Limit(), e.vec.spillDir)
		}
		idx, err := vector.NewWithOptions(int(f.GetVectorDim()), vectorMetric(f.GetVectorMetric()), o)
		if err != nil {
			return nil, err
		}
		out = append(out, &vectorField{name: f.GetName(), idx: idx})
	}
	return out, nil
}
