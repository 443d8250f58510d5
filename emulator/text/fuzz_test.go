package text

import (
	"testing"
	"unicode/utf8"
)

// FuzzApplySearch feeds arbitrary field text and query text through Apply
// and Search: no panic, no error for valid input, and a document whose text
// is a single plain ASCII word is found by that word.
func FuzzApplySearch(f *testing.F) {
	f.Add("hello world", "hello")
	f.Add("", "")
	f.Add("\x00\xff\xfe", "+-&&||!(){}[]^\"~*?:\\/")
	f.Add("日本語のテキスト", "テキスト")
	f.Add("a.b c-d e_f", "field:value AND NOT x")
	x, err := Open("", []string{"t"})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = x.Close() })
	f.Fuzz(func(t *testing.T, body, query string) {
		if err := x.Apply([]Op{{PK: "p", Fields: map[string]string{"t": body}}}); err != nil {
			t.Fatalf("apply %q: %v", body, err)
		}
		if _, err := x.Search(query, nil, 5, nil); err != nil {
			t.Fatalf("search %q: %v", query, err)
		}
		if utf8.ValidString(body) && isPlainWord(body) && !stopWord[body] {
			h, err := x.Search(body, nil, 5, nil)
			if err != nil || len(h) != 1 || h[0].PK != "p" {
				t.Fatalf("word %q not found: %v %v", body, h, err)
			}
		}
	})
}

func isPlainWord(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// stopWord lists the English stop words bleve's standard analyzer drops
// that a fuzzer plausibly generates; they are never findable (TXT-S1).
var stopWord = map[string]bool{}

func init() {
	for _, w := range []string{"a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was", "will", "with"} {
		stopWord[w] = true
	}
}
