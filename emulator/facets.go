package emulator

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/docstore"
)

// Facet limits (E77).
const (
	maxFacets      = 20
	maxFacetRanges = 100
)

// checkFacets validates the facet requests against the serving definition
// (E77): term counts on a KEYWORD or NUMERIC field, range buckets on a
// NUMERIC field of a numeric type.
func checkFacets(c *collection, req *apiv1.SearchRequest) error {
	if len(req.GetFacets()) > maxFacets {
		return badQuery("facets", fmt.Sprintf("at most %d", maxFacets), fmt.Sprint(len(req.GetFacets())), "too many facets")
	}
	for i, f := range req.GetFacets() {
		p := fmt.Sprintf("facets[%d]", i)
		fd, ok := c.schema.Fields[f.GetField()]
		if !ok {
			return badQuery(p+".field", "a field of "+c.name(), f.GetField(), "unknown facet field")
		}
		if f.GetSize() > MaxFacetSize {
			return badQuery(p+".size", fmt.Sprintf("<= %d", MaxFacetSize), fmt.Sprint(f.GetSize()), "facet size too large")
		}
		if len(f.GetRanges()) == 0 {
			switch fd.GetRole() {
			case apiv1.FieldRole_FIELD_ROLE_KEYWORD, apiv1.FieldRole_FIELD_ROLE_NUMERIC:
			default:
				return badQuery(p+".field", "a KEYWORD or NUMERIC field", f.GetField()+" ("+fd.GetRole().String()+")", "term counts need a keyword or numeric field")
			}
			if fd.GetType() == apiv1.FieldType_FIELD_TYPE_JSON {
				return badQuery(p+".field", "a scalar field", f.GetField()+" (FIELD_TYPE_JSON)", "term counts need a scalar field")
			}
			continue
		}
		if fd.GetRole() != apiv1.FieldRole_FIELD_ROLE_NUMERIC || !numericType(fd.GetType()) {
			return badQuery(p+".field", "a NUMERIC field of a numeric type", f.GetField(), "range buckets need a numeric field")
		}
		if f.GetSize() != 0 {
			return badQuery(p+".size", "0 with ranges", fmt.Sprint(f.GetSize()), "size applies to term counts only")
		}
		if len(f.GetRanges()) > maxFacetRanges {
			return badQuery(p+".ranges", fmt.Sprintf("at most %d", maxFacetRanges), fmt.Sprint(len(f.GetRanges())), "too many ranges")
		}
		for j, r := range f.GetRanges() {
			rp := fmt.Sprintf("%s.ranges[%d]", p, j)
			for _, b := range []struct {
				name string
				v    float64
				set  bool
			}{{"from", r.GetFrom(), r.From != nil}, {"to", r.GetTo(), r.To != nil}} {
				if b.set && (math.IsNaN(b.v) || math.IsInf(b.v, 0)) {
					return badQuery(rp+"."+b.name, "a finite number", fmt.Sprint(b.v), "invalid range bound")
				}
			}
			if r.From != nil && r.To != nil && r.GetFrom() >= r.GetTo() {
				return badQuery(rp, "from < to", fmt.Sprintf("[%g, %g)", r.GetFrom(), r.GetTo()), "empty range")
			}
		}
	}
	return nil
}

func numericType(t apiv1.FieldType) bool {
	switch t {
	case apiv1.FieldType_FIELD_TYPE_INT, apiv1.FieldType_FIELD_TYPE_UINT, apiv1.FieldType_FIELD_TYPE_FLOAT, apiv1.FieldType_FIELD_TYPE_BIT:
		return true
	}
	return false
}

// facetCounts counts every facet over the whole matching set (E77).
func facetCounts(c *collection, reqs []*apiv1.FacetRequest, matching func(yield func(string))) []*apiv1.FacetResult {
	type termCount struct {
		key   string
		value *apiv1.Value
		n     uint64
	}
	out := make([]*apiv1.FacetResult, len(reqs))
	terms := make([]map[string]*termCount, len(reqs))
	for i, r := range reqs {
		out[i] = &apiv1.FacetResult{Field: r.GetField()}
		if len(r.GetRanges()) == 0 {
			terms[i] = map[string]*termCount{}
			continue
		}
		for _, rg := range r.GetRanges() {
			out[i].Buckets = append(out[i].Buckets, &apiv1.FacetBucket{Key: rangeKey(rg)})
		}
	}
	var sc docstore.Scratch // one decoded value at a time; a new term keeps its own copy
	matching(func(pk string) {
		ent, _ := c.docs.Get(pk)
		for i, r := range reqs {
			v := ent.FieldScratch(r.GetField(), &sc)
			if isNull(v) {
				out[i].Missing++
				continue
			}
			if terms[i] != nil {
				key, err := apiv1.KeyComponent(v)
				if err != nil {
					out[i].Missing++
					continue
				}
				t := terms[i][key]
				if t == nil {
					t = &termCount{key: key, value: ent.Field(r.GetField())}
					terms[i][key] = t
				}
				t.n++
				continue
			}
			if !isNumericKind(v) {
				out[i].Missing++
				continue
			}
			x := asFloat(v)
			for j, rg := range r.GetRanges() {
				if (rg.From == nil || x >= rg.GetFrom()) && (rg.To == nil || x < rg.GetTo()) {
					out[i].Buckets[j].Count++
				}
			}
		}
	})
	for i, r := range reqs {
		if terms[i] == nil {
			continue
		}
		all := make([]*termCount, 0, len(terms[i]))
		for _, t := range terms[i] {
			all = append(all, t)
		}
		// Most frequent first, then by term, so equal counts are stable.
		sort.Slice(all, func(a, b int) bool {
			if all[a].n != all[b].n {
				return all[a].n > all[b].n
			}
			return all[a].key < all[b].key
		})
		size := int(r.GetSize())
		if size == 0 {
			size = DefaultFacetSize
		}
		for j, t := range all {
			if j < size {
				out[i].Buckets = append(out[i].Buckets, &apiv1.FacetBucket{Key: t.key, Count: t.n, Value: t.value})
			} else {
				out[i].Other += t.n
			}
		}
	}
	return out
}

// rangeKey is a range bucket's name: its key, or "<from>-<to>" with an
// empty side for an open bound.
func rangeKey(r *apiv1.FacetRange) string {
	if r.GetKey() != "" {
		return r.GetKey()
	}
	s := ""
	if r.From != nil {
		s = strconv.FormatFloat(r.GetFrom(), 'g', -1, 64)
	}
	s += "-"
	if r.To != nil {
		s += strconv.FormatFloat(r.GetTo(), 'g', -1, 64)
	}
	return s
}
