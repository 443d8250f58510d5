package emulator

import (
	"sort"
	"strings"
	"testing"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/text"
)

// E61, TXT-M1: both text engines serve the emulator's searches with the
// same matching sets (totals, keys; scores differ by TXT-M3); an unknown
// engine is refused by name at Open.
func TestTextEnginesE61(t *testing.T) {
	if _, err := Open("", Options{TextEngine: "lucene"}); err == nil || err.Error() != `emulator: unknown text engine "lucene" (want "memory" or "bleve")` {
		t.Fatalf("E61: unknown engine: %v", err)
	}
	titles := []string{"red fox", "Red wine, dry", "blue whale", "red-eyed frog", "naïve red café", "", "the end"}
	results := map[string][]string{}
	for _, eng := range []string{text.EngineMem, text.EngineBleve} {
		e := openMem(t, Options{TextEngine: eng})
		tok := mustCreate(t, e, itemsDef("items"), 1).GetSchemaGenerationToken()
		var muts []*apiv1.Mutation
		for i, title := range titles {
			muts = append(muts, itemUpsert(uint64(i+1), 10, i, title, "t", 1, nil))
		}
		muts = append(muts, del(uint64(len(titles)+1), 11, 1))
		mustIngest(t, e, mb("table:100", 1, tok, muts...))
		mustAdvance(t, e, "table:100", 1, 20)
		e.WaitIndexed()
		for _, q := range []string{"red", "whale frog", "café", "the"} {
			resp, err := e.Search(bg, &apiv1.SearchRequest{Collection: "items", Text: &apiv1.TextQuery{Query: q}, KeysOnly: true})
			if err != nil {
				t.Fatalf("%s: search %q: %v", eng, q, err)
			}
			var keys []string
			for _, h := range resp.GetHits() {
				keys = append(keys, h.GetPrimaryKey())
			}
			sort.Strings(keys)
			if int(resp.GetTotal()) != len(keys) {
				t.Fatalf("%s: search %q: total %d, %d hits", eng, q, resp.GetTotal(), len(keys))
			}
			results[q] = append(results[q], eng+":"+strings.Join(keys, ","))
		}
	}
	want := map[string]string{"red": "0,3,4", "whale frog": "2,3", "café": "4", "the": ""}
	for q, got := range results {
		for _, g := range got {
			_, keys, _ := strings.Cut(g, ":")
			if keys != want[q] {
				t.Errorf("TXT-M1: search %q: %s, want %s", q, g, want[q])
			}
		}
	}
}
