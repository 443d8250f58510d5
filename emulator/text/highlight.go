package text

import (
	"strings"

	"github.com/blevesearch/bleve/v2/analysis"
)

// SearchAll returns every document matching the query whose primary key
// passes filter (nil = all), ordered as Search orders hits (rule TXT-S6):
// the whole matching set, for exact totals, facets, sorts by a field and
// pagination.
func (x *Index) SearchAll(queryText string, fields []string, filter func(pk string) bool) ([]Hit, error) {
	n, err := x.Count()
	if err != nil {
		return nil, err
	}
	return x.Search(queryText, fields, int(n)+1, filter)
}

// Terms returns the distinct terms the standard analyzer makes of a query
// (rule TXT-S1): what Search matches and Highlight marks.
func (x *Index) Terms(queryText string) map[string]bool { return analyzedTerms(x.analyzer, queryText) }

// Highlight returns s with every token whose analyzed term is in terms
// wrapped in pre and post (rule TXT-S7); ok is false when no token matches.
// Tokens are found by the same analyzer that indexes the fields, so what is
// marked is exactly what made the field match (case and stop words
// included).
func (x *Index) Highlight(s string, terms map[string]bool, pre, post string) (string, bool) {
	return highlight(x.analyzer, s, terms, pre, post)
}

// highlight is Highlight with the analyzer given (both engines use it).
func highlight(an analysis.Analyzer, s string, terms map[string]bool, pre, post string) (string, bool) {
	var b strings.Builder
	last, marked := 0, false
	for _, tok := range an.Analyze([]byte(s)) {
		if !terms[string(tok.Term)] || tok.Start < last || tok.End > len(s) {
			continue
		}
		b.WriteString(s[last:tok.Start])
		b.WriteString(pre)
		b.WriteString(s[tok.Start:tok.End])
		b.WriteString(post)
		last, marked = tok.End, true
	}
	if !marked {
		return s, false
	}
	b.WriteString(s[last:])
	return b.String(), true
}
