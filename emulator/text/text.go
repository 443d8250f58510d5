// Package text is the emulator's full-text modality: an inverted index over a
// collection's text fields, built on bleve/v2 (scorch) with BM25 ranking.
//
// The index holds no documents of its own, only what is needed to rank
// primary keys: each configured field is analyzed with bleve's "standard"
// analyzer (Unicode word segmentation, lower-casing, English stop words) and
// nothing is stored, so a hit is a primary key and a score. The caller (the
// emulator core) owns the documents and decides what an upsert contains.
//
// Usage:
//
//	idx, err := text.Open("", []string{"title", "body"}) // "" = in memory
//	err = idx.Apply([]text.Op{{PK: "1", Fields: map[string]string{"title": "hello"}}})
//	hits, err := idx.Search("hello world", nil, 10, nil)
//
// Persistence (see specs/emulator-text-vector.md, rules TXT-P1..TXT-P4): the
// recommended mode for the emulator is in-memory, rebuilt from the document
// store on start, which is consistent by construction. An on-disk index
// (Open with a directory) is also supported: every Apply is durable when it
// returns (scorch waits for the segment to be persisted), and ApplyMarked
// stores an opaque mark in the same atomic batch so that after a restart the
// caller can compare Mark() with its own store's applied point and rebuild
// (Reset + re-Apply) when they differ.
//
// An Index is safe for concurrent use: bleve serializes batches internally and
// searches read a consistent snapshot.
package text

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/standard"
	"github.com/blevesearch/bleve/v2/document"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search/query"
	index "github.com/blevesearch/bleve_index_api"
)

// Op is one mutation of the text index, applied in slice order by Apply.
// An upsert replaces the whole indexed content of PK: fields absent from
// Fields are no longer searchable for that PK (rule TXT-A2).
type Op struct {
	PK     string
	Delete bool
	// Fields maps a configured field name to its text. Unknown field names
	// are an error (rule TXT-A3).
	Fields map[string]string
	// Texts, instead of Fields, gives the text of every configured field
	// in the index's field order ("" = the field is absent): the
	// emulator's form, which needs no map per document.
	Texts []string
}

// check validates op against the index's fields (TXT-A3).
func (op Op) check(fields []string, idx map[string]int) error {
	if op.Delete {
		if len(op.Fields) != 0 || op.Texts != nil {
			return errors.New("delete must not carry fields")
		}
		return nil
	}
	if op.Texts != nil {
		if op.Fields != nil {
			return errors.New("an op carries Fields or Texts, not both")
		}
		if len(op.Texts) != len(fields) {
			return fmt.Errorf("%d texts for %d fields %v", len(op.Texts), len(fields), fields)
		}
	}
	for name := range op.Fields {
		if _, ok := idx[name]; !ok {
			return fmt.Errorf("field %q is not a text field of this index (have %v)", name, fields)
		}
	}
	return nil
}

// text is the op's text of field i ("" = absent).
func (op Op) text(fields []string, i int) string {
	if op.Texts != nil {
		return op.Texts[i]
	}
	return op.Fields[fields[i]]
}

// Hit is one search result. Score is the BM25 score summed over the searched
// fields; higher is better.
type Hit struct {
	PK    string
	Score float64
}

// Index is a full-text index over a fixed list of fields.
type Index struct {
	dir     string
	scratch bool // dir is a private scratch directory, removed by Close
	fields  []string
	// internal maps a field name to the bleve field name it is indexed under
	// (f0, f1, ...), so that any column name, including ones with dots,
	// is a single bleve field.
	internal map[string]string
	fieldIdx map[string]int    // position of each field in fields
	analyzer analysis.Analyzer // the standard analyzer (rule TXT-S1)
	idx      bleve.Index
}

// Keys in bleve's internal (non-document) storage.
var (
	fieldsKey = []byte("_sfemu_text_fields")
	markKey   = []byte("_sfemu_text_mark")
)

// ErrFieldsMismatch is returned by Open when an on-disk index was built for a
// different field list; the caller should Destroy the directory and rebuild.
var ErrFieldsMismatch = errors.New("text: on-disk index has a different field list")

// Open opens (or creates) a text index over fields. dir "" keeps the index in
// memory. An existing on-disk index must have been created with the same
// field list in the same order, else Open returns an error wrapping
// ErrFieldsMismatch (rule TXT-P3).
func Open(dir string, fields []string) (*Index, error) {
	return open(dir, fields, nil)
}

func open(dir string, fields []string, config map[string]interface{}) (*Index, error) {
	if err := checkFields(fields); err != nil {
		return nil, err
	}
	internal := make(map[string]string, len(fields))
	fieldIdx := make(map[string]int, len(fields))
	for i, f := range fields {
		internal[f] = "f" + strconv.Itoa(i)
		fieldIdx[f] = i
	}
	x := &Index{dir: dir, fields: append([]string(nil), fields...), internal: internal, fieldIdx: fieldIdx}
	want, _ := json.Marshal(x.fields)

	if dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "index_meta.json")); err == nil {
			bi, err := bleve.Open(dir)
			if err != nil {
				return nil, fmt.Errorf("text: open %s: %w", dir, err)
			}
			got, err := bi.GetInternal(fieldsKey)
			if err != nil {
				_ = bi.Close()
				return nil, fmt.Errorf("text: read field list from %s: %w", dir, err)
			}
			if !bytes.Equal(got, want) {
				_ = bi.Close()
				return nil, fmt.Errorf("%w: %s has %s, want %s", ErrFieldsMismatch, dir, got, want)
			}
			x.idx = bi
			if err := x.initAnalyzer(); err != nil {
				return nil, err
			}
			return x, nil
		}
	}
	bi, err := bleve.NewUsing(dir, x.mapping(), scorch.Name, scorch.Name, config)
	if err != nil {
		return nil, fmt.Errorf("text: create index at %q: %w", dir, err)
	}
	if err := bi.SetInternal(fieldsKey, want); err != nil {
		_ = bi.Close()
		return nil, fmt.Errorf("text: store field list: %w", err)
	}
	x.idx = bi
	if err := x.initAnalyzer(); err != nil {
		return nil, err
	}
	return x, nil
}

// initAnalyzer looks up the analyzer Apply uses for every field.
func (x *Index) initAnalyzer() error {
	x.analyzer = x.idx.Mapping().AnalyzerNamed(standard.Name)
	if x.analyzer == nil {
		_ = x.idx.Close()
		return fmt.Errorf("text: analyzer %q is not registered", standard.Name)
	}
	return nil
}

// OpenScratch opens a new, empty index over fields whose segment files live
// in a fresh private directory under parent ("" = DefaultScratchParent()).
// Unlike Open("") (where scorch never merges segments, so every Apply adds
// one segment for good and both Apply and Search slow down with the number
// of batches), scorch persists and merges a scratch index's segments in the
// background. Apply returns once the batch is searchable, not when it is on
// disk: nothing in a scratch index is durable (rule TXT-P5), and Close removes
// the directory.
func OpenScratch(parent string, fields []string) (*Index, error) {
	if parent == "" {
		parent = DefaultScratchParent()
	}
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return nil, fmt.Errorf("text: create scratch parent %s: %w", parent, err)
	}
	removeOrphans(parent)
	dir, err := os.MkdirTemp(parent, scratchPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, fmt.Errorf("text: create scratch dir under %s: %w", parent, err)
	}
	x, err := open(dir, fields, map[string]interface{}{"unsafe_batch": true})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	x.scratch = true
	return x, nil
}

// scratchPrefix starts a scratch directory's name; the owner's pid follows.
const scratchPrefix = "text-"

// removeOrphans removes the scratch directories under parent whose owning
// process is gone (a crash skips Close). Directories of live processes,
// including this one, are left alone; errors are ignored (an orphan costs
// space, not correctness).
func removeOrphans(parent string) {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, ent := range ents {
		name := ent.Name()
		if !ent.IsDir() || !strings.HasPrefix(name, scratchPrefix) {
			continue
		}
		pidStr, _, ok := strings.Cut(strings.TrimPrefix(name, scratchPrefix), "-")
		pid, err := strconv.Atoi(pidStr)
		if !ok || err != nil || pid <= 0 || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		_ = os.RemoveAll(filepath.Join(parent, name))
	}
}

// DefaultScratchParent is where OpenScratch puts its directories by
// default: /dev/shm when it is a writable directory (a RAM file system, so
// the index stays in memory and scorch's fsyncs cost nothing), else the
// system temporary directory.
func DefaultScratchParent() string {
	const shm = "/dev/shm"
	if st, err := os.Stat(shm); err == nil && st.IsDir() {
		if f, err := os.CreateTemp(shm, ".sfemu-probe-"); err == nil {
			name := f.Name()
			_ = f.Close()
			_ = os.Remove(name)
			return filepath.Join(shm, "sfemu-text")
		}
	}
	return filepath.Join(os.TempDir(), "sfemu-text")
}

// mapping builds the bleve mapping: a static document mapping with one
// analyzed, unstored text field per configured field and BM25 scoring.
func (x *Index) mapping() *mapping.IndexMappingImpl {
	doc := bleve.NewDocumentStaticMapping()
	for _, f := range x.fields {
		fm := bleve.NewTextFieldMapping()
		fm.Analyzer = standard.Name
		fm.Store = false
		fm.IncludeInAll = false
		fm.IncludeTermVectors = false
		fm.DocValues = false
		doc.AddFieldMappingsAt(x.internal[f], fm)
	}
	m := bleve.NewIndexMapping()
	m.DefaultMapping = doc
	m.DefaultAnalyzer = standard.Name
	m.ScoringModel = index.BM25Scoring
	m.StoreDynamic = false
	m.IndexDynamic = false
	m.DocValuesDynamic = false
	return m
}

// Fields returns the configured field names in order.
func (x *Index) Fields() []string { return append([]string(nil), x.fields...) }

// Apply applies ops atomically, in order; for the same PK the last op in the
// slice wins (rule TXT-A1). It validates every op before changing anything.
func (x *Index) Apply(ops []Op) error { return x.apply(ops, nil) }

// ApplyMarked is Apply plus storing mark in the same atomic batch (rule TXT-P2).
func (x *Index) ApplyMarked(ops []Op, mark []byte) error {
	if mark == nil {
		mark = []byte{}
	}
	return x.apply(ops, mark)
}

func (x *Index) apply(ops []Op, mark []byte) error {
	for i, op := range ops {
		if op.PK == "" {
			return fmt.Errorf("text: op %d: empty primary key", i)
		}
		if err := op.check(x.fields, x.fieldIdx); err != nil {
			return fmt.Errorf("text: op %d (pk %q): %w", i, op.PK, err)
		}
	}
	b := x.idx.NewBatch()
	for i, op := range ops {
		if op.Delete {
			b.Delete(op.PK)
			continue
		}
		// The document is built here rather than by bleve's mapping: the
		// mapping walks the value by reflection and adds an "_all"
		// composite field to every document, neither of which this index
		// uses. The fields are what the mapping would produce for them
		// (indexed, not stored, no term vectors, no doc values; rule TXT-S1).
		doc := document.NewDocument(op.PK)
		for f, name := range x.fields {
			v := op.text(x.fields, f)
			if _, ok := op.Fields[name]; !ok && v == "" {
				continue
			}
			doc.AddField(document.NewTextFieldCustom(x.internal[name], nil, []byte(v), index.IndexField, x.analyzer))
		}
		doc.SetIndexed()
		if err := b.IndexAdvanced(doc); err != nil {
			return fmt.Errorf("text: op %d (pk %q): %w", i, op.PK, err)
		}
	}
	if mark != nil {
		b.SetInternal(markKey, mark)
	}
	if b.Size() == 0 {
		return nil
	}
	if err := x.idx.Batch(b); err != nil {
		return fmt.Errorf("text: apply batch of %d ops: %w", len(ops), err)
	}
	return nil
}

// Mark returns the mark stored by the last ApplyMarked, or nil if none.
func (x *Index) Mark() ([]byte, error) {
	v, err := x.idx.GetInternal(markKey)
	if err != nil {
		return nil, fmt.Errorf("text: read mark: %w", err)
	}
	return v, nil
}

// Segments returns the number of segments in the index's current snapshot
// (each Apply adds one; a scratch or on-disk index merges them, TXT-P5).
func (x *Index) Segments() (int, error) {
	adv, err := x.idx.Advanced()
	if err != nil {
		return 0, fmt.Errorf("text: segments: %w", err)
	}
	r, err := adv.Reader()
	if err != nil {
		return 0, fmt.Errorf("text: segments: %w", err)
	}
	defer r.Close()
	snap, ok := r.(*scorch.IndexSnapshot)
	if !ok {
		return 0, fmt.Errorf("text: segments: reader is %T, not a scorch snapshot", r)
	}
	return len(snap.Segments()), nil
}

// Count returns the number of indexed documents.
func (x *Index) Count() (uint64, error) {
	n, err := x.idx.DocCount()
	if err != nil {
		return 0, fmt.Errorf("text: doc count: %w", err)
	}
	return n, nil
}

// Search ranks documents matching the analyzed query text in the given
// fields (nil or empty = all configured fields) and returns at most k hits,
// best first; ties are broken by ascending PK so results are deterministic
// (rule TXT-S3). Query terms are ORed; a document's score is the sum of its
// per-field BM25 scores (rule TXT-S1). filter, if not nil, keeps only PKs for
// which it returns true; the top k is taken after filtering (rule TXT-S4).
func (x *Index) Search(queryText string, fields []string, k int, filter func(pk string) bool) ([]Hit, error) {
	hits, _, err := x.SearchTotal(queryText, fields, k, filter)
	return hits, err
}

// SearchTotal is Search that also returns the number of indexed documents
// matching the query before the filter, from the same index snapshot
// (rule TXT-S8).
func (x *Index) SearchTotal(queryText string, fields []string, k int, filter func(pk string) bool) ([]Hit, uint64, error) {
	if k <= 0 {
		return nil, 0, fmt.Errorf("text: k must be positive, got %d", k)
	}
	if len(fields) == 0 {
		fields = x.fields
	}
	var disj []query.Query
	for _, f := range fields {
		in, ok := x.internal[f]
		if !ok {
			return nil, 0, fmt.Errorf("text: search field %q is not a text field of this index (have %v)", f, x.fields)
		}
		mq := bleve.NewMatchQuery(queryText)
		mq.SetField(in)
		mq.Analyzer = standard.Name
		disj = append(disj, mq)
	}
	q := bleve.NewDisjunctionQuery(disj...)

	// bleve ranks by score alone (sorting by "_id" as a tie-breaker would
	// load the id of every matching document, several times slower on
	// common terms). Ties are made deterministic here instead: fetch a
	// window, and widen it until the k-th surviving hit scores strictly
	// above everything not fetched (or the matches run out); then order the
	// window by (score desc, pk asc) and cut k. With a filter the window
	// starts wider because some hits will not survive.
	size := k + 1
	if filter != nil {
		size = max(4*k, 64)
	}
	for {
		req := bleve.NewSearchRequestOptions(q, size, 0, false)
		res, err := x.idx.Search(req)
		if err != nil {
			return nil, 0, fmt.Errorf("text: search %q: %w", queryText, err)
		}
		hits := make([]Hit, 0, len(res.Hits))
		for _, h := range res.Hits {
			if filter == nil || filter(h.ID) {
				hits = append(hits, Hit{PK: h.ID, Score: h.Score})
			}
		}
		exhausted := len(res.Hits) < size || uint64(len(res.Hits)) >= res.Total
		if !exhausted && len(hits) >= k && len(res.Hits) > 0 {
			// Unfetched documents score at most the last fetched one.
			exhausted = res.Hits[len(res.Hits)-1].Score < hits[k-1].Score
		}
		if exhausted {
			sortHits(hits)
			if len(hits) > k {
				hits = hits[:k]
			}
			return hits, res.Total, nil
		}
		size *= 4
	}
}

// sortHits orders hits by (score desc, pk asc) (rule TXT-S3).
func sortHits(h []Hit) {
	sort.Slice(h, func(i, j int) bool {
		if h[i].Score != h[j].Score {
			return h[i].Score > h[j].Score
		}
		return h[i].PK < h[j].PK
	})
}

// Reset removes every document and the mark, keeping the field list, so the
// caller can rebuild from its document store (rule TXT-P4).
func (x *Index) Reset() error {
	for {
		req := bleve.NewSearchRequestOptions(bleve.NewMatchAllQuery(), 10000, 0, false)
		res, err := x.idx.Search(req)
		if err != nil {
			return fmt.Errorf("text: reset: list docs: %w", err)
		}
		b := x.idx.NewBatch()
		for _, h := range res.Hits {
			b.Delete(h.ID)
		}
		b.DeleteInternal(markKey)
		if err := x.idx.Batch(b); err != nil {
			return fmt.Errorf("text: reset: delete batch: %w", err)
		}
		if len(res.Hits) == 0 {
			return nil
		}
	}
}

// Close releases the index. An on-disk index can be reopened with Open.
func (x *Index) Close() error {
	err := x.idx.Close()
	if x.scratch {
		if rerr := os.RemoveAll(x.dir); err == nil && rerr != nil {
			err = rerr
		}
	}
	if err != nil {
		return fmt.Errorf("text: close: %w", err)
	}
	return nil
}

// Destroy removes an on-disk index directory (after Close). It is what the
// caller does on ErrFieldsMismatch before reopening and rebuilding.
func Destroy(dir string) error {
	if dir == "" {
		return nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("text: destroy %s: %w", dir, err)
	}
	return nil
}
