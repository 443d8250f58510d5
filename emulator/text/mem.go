package text

import (
	"fmt"
	"slices"
	"sync"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/standard"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/registry"
)

// Mem is the emulator's default text engine (rules TXT-M1..TXT-M8): an
// in-memory inverted index with the same analysis as Index (bleve's
// standard analyzer) and the same API, built for ingest speed. Index (bleve,
// scorch) spends ~25-35 cpu-µs per short row building and merging zap
// segments whose files, stored layout and merge policy the emulator never
// uses (it rebuilds every index from its document store on start, E61);
// Mem appends each document's term frequencies to per-term posting lists
// and nothing else (specs/emulator-text-vector.md, "Throughput").
//
// Layout: documents get increasing internal ids; an upsert of a key that is
// indexed retires the old id (its postings stay until compaction, and
// searches skip retired ids) and appends a new one. Posting lists are
// therefore append-only and sorted by id. Compaction rewrites every list
// once retired ids outnumber live ones, so memory stays within about twice
// what the live documents need and the work per op is amortised constant.
type Mem struct {
	fields   []string
	fieldIdx map[string]int
	analyzer analysis.Analyzer // bleve's standard analyzer (TXT-S1)
	stop     analysis.TokenMap // its English stop words, for the fast path

	mu     sync.RWMutex
	closed bool
	docs   docTable
	byPK   map[string]uint32   // live id of each indexed key
	dicts  []map[string]uint32 // per field: term -> index into lists
	lists  []listTable         // per field: posting lists, sorted by id
	arena  arena               // new terms' bytes and first postings
	total  []int64             // tokens of each field summed over live documents
	dead   int                 // retired ids still referenced by postings
	// bytes is the accounted memory (TXT-M6, memsize.go), kept current by
	// add and recount; keysPeak is byPK's high-water mark.
	bytes    int64
	keysPeak int

	toks []string // scratch of apply, reused across ops (guarded by mu)
}

type posting struct {
	doc uint32
	tf  uint32
}

// OpenMem returns an empty in-memory index over fields (same validation as
// Open).
func OpenMem(fields []string) (*Mem, error) {
	if err := checkFields(fields); err != nil {
		return nil, err
	}
	cache := registry.NewCache()
	an, err := cache.AnalyzerNamed(standard.Name)
	if err != nil {
		return nil, fmt.Errorf("text: analyzer %q: %w", standard.Name, err)
	}
	stop, err := cache.TokenMapNamed(en.StopName)
	if err != nil {
		return nil, fmt.Errorf("text: stop words %q: %w", en.StopName, err)
	}
	m := &Mem{fields: append([]string(nil), fields...), fieldIdx: map[string]int{}, analyzer: an, stop: stop}
	for i, f := range fields {
		m.fieldIdx[f] = i
	}
	m.reset()
	return m, nil
}

// reset empties the index.
func (m *Mem) reset() {
	nf := len(m.fields)
	m.docs = docTable{nf: nf}
	m.byPK = map[string]uint32{}
	m.dicts = make([]map[string]uint32, nf)
	m.lists = make([]listTable, nf)
	m.arena = arena{}
	for i := range m.dicts {
		m.dicts[i] = map[string]uint32{}
	}
	m.total = make([]int64, nf)
	m.dead = 0
	m.keysPeak = 0
	m.recount()
}

// checkFields is the field-list validation shared by both engines.
func checkFields(fields []string) error {
	if len(fields) == 0 {
		return fmt.Errorf("text: at least one text field is required")
	}
	seen := make(map[string]bool, len(fields))
	for i, f := range fields {
		if f == "" {
			return fmt.Errorf("text: field %d has an empty name", i)
		}
		if seen[f] {
			return fmt.Errorf("text: field %q listed twice", f)
		}
		seen[f] = true
	}
	return nil
}

// Fields returns the configured field names in order.
func (m *Mem) Fields() []string { return append([]string(nil), m.fields...) }

// Apply applies ops in order, atomically for searches (they run under the
// same lock); the last op of a PK wins (TXT-A1, TXT-A2). Every op is
// validated before anything changes (TXT-A3).
func (m *Mem) Apply(ops []Op) error {
	if err := m.validate(ops); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("text: apply batch of %d ops: index is closed", len(ops))
	}
	for _, op := range ops {
		m.retire(op.PK)
		if !op.Delete {
			m.add(op)
		}
	}
	if m.dead > compactMin && m.dead > len(m.byPK) {
		m.compact()
	}
	return nil
}

func (m *Mem) validate(ops []Op) error {
	for i, op := range ops {
		if op.PK == "" {
			return fmt.Errorf("text: op %d: empty primary key", i)
		}
		if err := op.check(m.fields, m.fieldIdx); err != nil {
			return fmt.Errorf("text: op %d (pk %q): %w", i, op.PK, err)
		}
	}
	return nil
}

// retire removes pk's live document, if any, from the statistics; its
// postings stay until compaction.
func (m *Mem) retire(pk string) {
	id, ok := m.byPK[pk]
	if !ok {
		return
	}
	c, off := m.docs.at(id)
	c.live[off] = false
	for f, n := range c.lensOf(off, m.docs.nf) {
		m.total[f] -= int64(n)
	}
	delete(m.byPK, pk)
	m.dead++
}

// add indexes op as a new document id.
func (m *Mem) add(op Op) {
	if m.docs.n%chunkSize == 0 {
		m.bytes += chunkBytes(m.docs.nf) + 8
	}
	id := m.docs.add(op.PK)
	m.bytes += int64(len(op.PK))
	c, off := m.docs.at(id)
	lens := c.lensOf(off, m.docs.nf)
	for f := range m.fields {
		s := op.text(m.fields, f)
		if s == "" {
			continue
		}
		m.toks = m.tokens(s, m.toks[:0])
		// Term frequencies by sorting the field's tokens and counting
		// runs: cheaper than a map for row-sized text.
		slices.Sort(m.toks)
		dict := m.dicts[f]
		for i := 0; i < len(m.toks); {
			t, j := m.toks[i], i+1
			for j < len(m.toks) && m.toks[j] == t {
				j++
			}
			p := posting{doc: id, tf: uint32(j - i)}
			tid, ok := dict[t]
			if !ok {
				// A fast-path term is a substring of the document's
				// text: the arena copies it so the dictionary does not
				// pin the row.
				lists := &m.lists[f]
				if lists.n%chunkSize == 0 {
					m.bytes += listChunkBytes
				}
				dict[m.arena.term(t)] = lists.add(m.arena.newList(p))
				m.bytes += int64(len(t)) + mapEntryBytes + postingBytes
				i = j
				continue
			}
			pl := m.lists[f].get(tid)
			oc := cap(pl)
			pl = append(pl, p)
			m.bytes += int64(cap(pl)-oc) * postingBytes
			m.lists[f].set(tid, pl)
			i = j
		}
		lens[f] = uint32(len(m.toks))
		m.total[f] += int64(len(m.toks))
	}
	m.byPK[op.PK] = id
	if len(m.byPK) > m.keysPeak {
		m.keysPeak = len(m.byPK)
		m.bytes += mapEntryBytes
	}
}

// compact renumbers the live documents and drops retired postings and the
// terms left without any.
func (m *Mem) compact() {
	nf := m.docs.nf
	remap := make([]uint32, m.docs.n)
	docs := docTable{nf: nf}
	for id := uint32(0); id < uint32(m.docs.n); id++ {
		c, off := m.docs.at(id)
		if !c.live[off] {
			continue
		}
		nid := docs.add(c.pk[off])
		nc, noff := docs.at(nid)
		copy(nc.lensOf(noff, nf), c.lensOf(off, nf))
		remap[id] = nid
		m.byPK[c.pk[off]] = nid
	}
	for f, dict := range m.dicts {
		var lists listTable
		for t, tid := range dict {
			var out []posting
			for _, p := range m.lists[f].get(tid) {
				if m.docs.live(p.doc) {
					out = append(out, posting{doc: remap[p.doc], tf: p.tf})
				}
			}
			if len(out) == 0 {
				delete(dict, t)
				continue
			}
			dict[t] = lists.add(out)
		}
		m.lists[f] = lists
	}
	m.docs = docs
	m.dead = 0
	m.recount()
}

// Count returns the number of indexed documents.
func (m *Mem) Count() (uint64, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return uint64(len(m.byPK)), nil
}

// Segments is 1: the index is one structure (kept for the benchmarks that
// report bleve's segment count).
func (m *Mem) Segments() (int, error) { return 1, nil }

// Close releases the index; later calls fail.
func (m *Mem) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	m.reset()
	return nil
}

// Terms returns the distinct terms the standard analyzer makes of a query
// (TXT-S7).
func (m *Mem) Terms(queryText string) map[string]bool { return analyzedTerms(m.analyzer, queryText) }

// Highlight marks the tokens of s whose term is in terms (TXT-S7).
func (m *Mem) Highlight(s string, terms map[string]bool, pre, post string) (string, bool) {
	return highlight(m.analyzer, s, terms, pre, post)
}
