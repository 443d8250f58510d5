package text

import (
	"github.com/blevesearch/bleve/v2/analysis"
)

// tokens appends the analyzed terms of s to out (TXT-S1: bleve's standard
// analyzer: UAX #29 words, lower-cased, English stop words removed).
//
// Fast path (TXT-M2): text made only of ASCII letters, digits, spaces, tabs
// and line breaks — most rows of a database table — is split here without
// the analyzer: there, the Unicode word rules reduce to "a maximal run of
// letters and digits is one word" (letters and digits never break apart,
// whitespace always separates and is no word), and lower-casing is ASCII.
// Anything else (punctuation, which the word rules join or split by
// context, and every non-ASCII byte) goes through bleve's analyzer.
// TestFastTokensMatchAnalyzer compares both on random text.
func (m *Mem) tokens(s string, out []string) []string {
	if !simpleASCII(s) {
		for _, tok := range m.analyzer.Analyze([]byte(s)) {
			out = append(out, string(tok.Term))
		}
		return out
	}
	for i := 0; i < len(s); {
		for i < len(s) && !isAlnum(s[i]) {
			i++
		}
		start, upper := i, false
		for i < len(s) && isAlnum(s[i]) {
			upper = upper || ('A' <= s[i] && s[i] <= 'Z')
			i++
		}
		if start == i {
			break
		}
		t := s[start:i]
		if upper {
			t = lowerASCII(t)
		}
		if !m.stop[t] {
			out = append(out, t)
		}
	}
	return out
}

// simpleASCII reports whether s is only ASCII letters, digits and
// whitespace (space, tab, CR, LF), the fast path's domain.
func simpleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isAlnum(c) && c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}

func lowerASCII(t string) string {
	b := []byte(t)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// analyzedTerms is the set of terms an analyzer makes of a query.
func analyzedTerms(an analysis.Analyzer, queryText string) map[string]bool {
	out := map[string]bool{}
	for _, tok := range an.Analyze([]byte(queryText)) {
		out[string(tok.Term)] = true
	}
	return out
}
