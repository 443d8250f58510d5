package text

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TXT-S6: SearchAll returns the whole filtered matching set in Search's
// order; Search with a smaller k returns its prefix.
func TestSearchAllIsTheWholeMatchingSet(t *testing.T) {
	x := mustOpen(t, "", "title")
	var ops []Op
	for i := 0; i < 300; i++ {
		title := "cable"
		if i%3 != 0 {
			title = fmt.Sprintf("wireless speaker %d", i%7)
		}
		ops = append(ops, Op{PK: fmt.Sprintf("k%03d", i), Fields: map[string]string{"title": title}})
	}
	require.NoError(t, x.Apply(ops))
	odd := func(pk string) bool { return pk[len(pk)-1]%2 == 1 }
	all, err := x.SearchAll("wireless", nil, odd)
	require.NoError(t, err)
	want := 0
	for i := 0; i < 300; i++ {
		if i%3 != 0 && i%2 == 1 {
			want++
		}
	}
	require.Len(t, all, want)
	top, err := x.Search("wireless", nil, 10, odd)
	require.NoError(t, err)
	require.Equal(t, top, all[:10])
}

// TXT-S7: Highlight marks the tokens the analyzer makes of the query's
// terms, keeping the original text between them.
func TestHighlightMarksAnalyzedTerms(t *testing.T) {
	x := mustOpen(t, "", "title")
	terms := x.Terms("The WIRELESS charger")
	require.Equal(t, map[string]bool{"wireless": true, "charger": true}, terms)
	got, ok := x.Highlight("A wireless Charger; the wirelessness", terms, "<b>", "</b>")
	require.True(t, ok)
	require.Equal(t, "A <b>wireless</b> <b>Charger</b>; the wirelessness", got)
	got, ok = x.Highlight("nothing here", terms, "<b>", "</b>")
	require.False(t, ok)
	require.Equal(t, "nothing here", got)
}

// TXT-S8: SearchTotal counts every match of the snapshot, before the filter
// and the cut.
func TestSearchTotalCountsBeforeFilter(t *testing.T) {
	x := mustOpen(t, "", "title")
	require.NoError(t, x.Apply([]Op{
		{PK: "a", Fields: map[string]string{"title": "red kite"}},
		{PK: "b", Fields: map[string]string{"title": "red car"}},
		{PK: "c", Fields: map[string]string{"title": "red bus"}},
		{PK: "d", Fields: map[string]string{"title": "blue bus"}},
	}))
	hits, total, err := x.SearchTotal("red", nil, 1, func(pk string) bool { return pk != "a" })
	require.NoError(t, err)
	require.Equal(t, uint64(3), total)
	require.Len(t, hits, 1)
}
