package sqlfront

import (
	"context"
	"testing"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value/golden"
	"github.com/stretchr/testify/require"
)

// goldenRecords reads the records of one kind of a ../shared/golden file
// through the shared golden locator (a missing file fails the test).
func goldenRecords(t *testing.T, file, kind string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, rec := range golden.OfKind(t, "golden/"+file, kind) {
		var m map[string]any
		rec.Decode(t, &m)
		out = append(out, m)
	}
	return out
}

func newTestServer(t *testing.T) (*Server, *Session) {
	t.Helper()
	c, err := fakeupstream.New(fakeupstream.Config{Seed: 1})
	require.NoError(t, err)
	s, err := New(context.Background(), c)
	require.NoError(t, err)
	return s, s.NewSession("")
}

func mustExec(t *testing.T, ss *Session, sql string) Result {
	t.Helper()
	res, err := ss.Exec(context.Background(), sql)
	require.NoError(t, err, sql)
	return res
}
