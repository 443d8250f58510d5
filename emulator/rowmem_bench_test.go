package emulator

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
)

// The reads of the compact row (E45): a filter, facet or sort over the
// whole collection decodes one field per document from its row instead of
// looking it up in a map of Values. These benchmarks measure what that
// costs the readers, and what the rows cost the heap, on the 10-column rows
// of the snapshot benchmark (adapter BenchmarkSN_Snapshot), ingested
// positionally as the adapter does, metadata_aux off (every filter is a
// scan). Corpus: SFEMU_BENCH_DOCS documents (default 20k).

func wideDef() *apiv1.CollectionDefinition {
	f := func(name string, tp apiv1.FieldType, role apiv1.FieldRole) *apiv1.Field {
		return &apiv1.Field{Name: name, Type: tp, Role: role}
	}
	return &apiv1.CollectionDefinition{
		Name: "wide",
		Fields: []*apiv1.Field{
			f("id", apiv1.FieldType_FIELD_TYPE_INT, apiv1.FieldRole_FIELD_ROLE_PRIMARY_KEY),
			f("a", apiv1.FieldType_FIELD_TYPE_INT, apiv1.FieldRole_FIELD_ROLE_NUMERIC),
			f("b", apiv1.FieldType_FIELD_TYPE_STRING, apiv1.FieldRole_FIELD_ROLE_KEYWORD),
			f("c", apiv1.FieldType_FIELD_TYPE_INT, apiv1.FieldRole_FIELD_ROLE_NUMERIC),
			f("d", apiv1.FieldType_FIELD_TYPE_STRING, apiv1.FieldRole_FIELD_ROLE_KEYWORD),
			f("e", apiv1.FieldType_FIELD_TYPE_STRING, apiv1.FieldRole_FIELD_ROLE_STORED_ONLY),
			f("f", apiv1.FieldType_FIELD_TYPE_FLOAT, apiv1.FieldRole_FIELD_ROLE_NUMERIC),
			f("g", apiv1.FieldType_FIELD_TYPE_INT, apiv1.FieldRole_FIELD_ROLE_NUMERIC),
			f("h", apiv1.FieldType_FIELD_TYPE_STRING, apiv1.FieldRole_FIELD_ROLE_KEYWORD),
			f("i", apiv1.FieldType_FIELD_TYPE_INT, apiv1.FieldRole_FIELD_ROLE_NUMERIC),
		},
		PrimaryKey:       []string{"id"},
		SourcePartitions: []string{"table:500"},
	}
}

// ingestWide ingests n wide rows positionally into e (collection created).
func ingestWide(tb testing.TB, e *Emulator, n int) {
	tok := mustCreate(tb, e, wideDef(), 1).GetSchemaGenerationToken()
	layout := contract.NewLayout([]string{"id", "a", "b", "c", "d", "e", "f", "g", "h", "i"})
	for start := 0; start < n; start += benchBatch {
		b := &apiv1.MutationBatch{SourcePartition: "table:500", SourceEpoch: 1, FirstSeq: uint64(start + 1), SchemaGenerationToken: tok}
		rows := &contract.Rows{Layout: layout}
		for id := start; id < start+benchBatch && id < n; id++ {
			b.Mutations = append(b.Mutations, &apiv1.Mutation{Seq: uint64(id + 1), CommitTs: uint64(10 + start/benchBatch), Kind: apiv1.MutationKind_MUTATION_KIND_UPSERT, PrimaryKey: fmt.Sprint(id)})
			rows.Vals = append(rows.Vals, []*apiv1.Value{val(id), val(id * 7), val(fmt.Sprintf("name-%06d", id)), val(id % 1000),
				val(fmt.Sprintf("v%d", id%10)), val(fmt.Sprintf("stored text %d", id)), val(float64(id) / 3), val(id % 100), val(fmt.Sprintf("h%d", id%37)), val(id * 11)})
		}
		if _, err := e.IngestRows(bg, b, rows); err != nil {
			tb.Fatal(err)
		}
	}
	mustAdvance(tb, e, "table:500", 1, 1<<40)
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkRowBytesPerDocument: heap held per stored document (E45), the
// live heap after ingesting the corpus minus before, per document. b.N
// repeats the build; the metric is of the last one.
func BenchmarkRowBytesPerDocument(b *testing.B) {
	n := benchSize("SFEMU_BENCH_DOCS")
	var per float64
	for i := 0; i < b.N; i++ {
		before := liveHeap()
		e, err := Open("", Options{})
		if err != nil {
			b.Fatal(err)
		}
		ingestWide(b, e, n)
		per = float64(int64(liveHeap())-int64(before)) / float64(n)
		runtime.KeepAlive(e)
		e.Close()
	}
	b.ReportMetric(per, "heap-B/doc")
}

var (
	wideOnce sync.Once
	wideEmu  *Emulator
)

// BenchmarkRowReads: latency of whole-collection reads, each a scan of
// every document: a two-field filter, the same with a term and a range
// facet, a sort on a numeric field, and GetDocument of one key.
func BenchmarkRowReads(b *testing.B) {
	n := benchSize("SFEMU_BENCH_DOCS")
	wideOnce.Do(func() {
		e, err := Open("", Options{})
		if err != nil {
			b.Fatal(err)
		}
		ingestWide(b, e, n)
		wideEmu = e
	})
	filters := []*apiv1.Filter{
		{Field: "g", Op: apiv1.FilterOp_FILTER_OP_GTE, Value: val(50)},
		{Field: "d", Op: apiv1.FilterOp_FILTER_OP_NE, Value: val("v3")},
	}
	cases := []struct {
		name string
		req  *apiv1.SearchRequest
	}{
		{"filter", &apiv1.SearchRequest{Collection: "wide", Filters: filters, Limit: 10, KeysOnly: true}},
		{"filter-facets", &apiv1.SearchRequest{Collection: "wide", Filters: filters, Limit: 10, KeysOnly: true, Facets: []*apiv1.FacetRequest{
			{Field: "h"}, {Field: "f", Ranges: []*apiv1.FacetRange{{To: proto64(1000)}, {From: proto64(1000)}}}}}},
		{"filter-sort", &apiv1.SearchRequest{Collection: "wide", Filters: filters, Limit: 10, Sort: []*apiv1.SortField{{Field: "i", Descending: true}}}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				resp, err := wideEmu.Search(bg, c.req)
				if err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
				if len(resp.GetHits()) != 10 {
					b.Fatalf("%d hits", len(resp.GetHits()))
				}
			}
			b.StopTimer()
			reportPercentiles(b, lat)
			b.ReportMetric(float64(n), "docs")
		})
	}
	b.Run("get", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := wideEmu.GetDocument(bg, &apiv1.GetDocumentRequest{Collection: "wide", PrimaryKey: fmt.Sprint(i % n)}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func proto64(x float64) *float64 { return &x }
