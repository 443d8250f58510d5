package sqlfront

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/stretchr/testify/require"
)

// sharedDir finds ../shared next to the module root; the golden data must
// be there (tests fail, not skip, without it).
func sharedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, parent, dir, "go.mod not found above the test directory")
		dir = parent
	}
	shared := filepath.Join(dir, "..", "shared")
	_, err = os.Stat(filepath.Join(shared, "golden"))
	require.NoError(t, err, "golden data missing: %s", shared)
	return shared
}

func goldenRecords(t *testing.T, file, kind string) []map[string]any {
	t.Helper()
	f, err := os.Open(filepath.Join(sharedDir(t), "golden", file))
	require.NoError(t, err)
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m))
		if m["kind"] == kind {
			out = append(out, m)
		}
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, out, "no %s records in %s", kind, file)
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
