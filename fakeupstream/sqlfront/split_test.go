package sqlfront

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
)

// startsRegion: a region of c begins exactly at table id's prefix.
func startsRegion(c *fakeupstream.Cluster, id int64) bool {
	k := tablecodec.EncodeTablePrefix(nil, id)
	return bytes.Equal(c.LocateRaw(k).StartKey, codec.EncodeBytes(nil, k))
}

// S19: every physical table, partitions and the system tables included,
// starts its own region once its DDL commits (TiDB's split-table = true), and
// again after a durable cluster is reopened (regions are not persisted).
func TestS19EveryTableHasItsOwnRegion(t *testing.T) {
	dir := t.TempDir()
	c, s := openDurable(t, dir)
	ss := s.NewSession("")
	mustExec(t, ss, "CREATE DATABASE shop")
	mustExec(t, ss, "CREATE TABLE shop.a (id BIGINT PRIMARY KEY, v INT)")
	mustExec(t, ss, "CREATE TABLE shop.p (id BIGINT PRIMARY KEY, v INT) PARTITION BY HASH(id) PARTITIONS 3")
	mustExec(t, ss, "TRUNCATE TABLE shop.a")
	ids := func() []int64 {
		var out []int64
		for _, name := range []string{"a", "p"} {
			ti, _, err := s.TableInfo("shop", name)
			require.NoError(t, err)
			out = append(out, ti.PhysicalIDs()...)
		}
		return append(out, DDLJobTableID, DDLHistoryTableID)
	}
	check := func(c *fakeupstream.Cluster, when string) {
		all := ids()
		require.Len(t, all, 6)
		for _, id := range all {
			require.True(t, startsRegion(c, id), "%s: table %d shares a region with the table before it", when, id)
		}
	}
	check(c, "after the DDLs")
	require.NoError(t, c.Close())
	c, s = openDurable(t, dir)
	t.Cleanup(func() { _ = c.Close() })
	check(c, "after reopening")
}
