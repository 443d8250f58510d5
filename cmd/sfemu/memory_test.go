package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSR14_QuotaFlags: sizes parse with their units, a quota of 0 or a
// bad size is refused naming the flag, and `sfemu run` refuses it before
// touching the data dir.
func TestSR14_QuotaFlags(t *testing.T) {
	for in, want := range map[string]int64{"512MiB": 512 << 20, "2GiB": 2 << 30, "64M": 64 << 20, "1048576": 1 << 20, "10 KiB": 10 << 10, "7B": 7} {
		got, err := parseSize("memory-quota", in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "lots", "-1MiB", "1.5GiB", "9999999999TiB"} {
		_, err := parseSize("spill-quota", bad)
		require.ErrorContains(t, err, "--spill-quota", bad)
	}
	cfg := defaultRunConfig()
	mem, spill, err := cfg.quotas()
	require.NoError(t, err)
	require.Equal(t, int64(512<<20), mem, "default 512 MiB")
	require.Equal(t, int64(-1), spill, "default: free space minus 1 GiB")

	cfg.MemoryQuota = "0"
	_, _, err = cfg.quotas()
	require.ErrorContains(t, err, "--memory-quota must be > 0")
	cfg.MemoryQuota, cfg.SpillQuota = "64MiB", "0GiB"
	_, _, err = cfg.quotas()
	require.ErrorContains(t, err, "--spill-quota must be > 0")

	cfg = defaultRunConfig()
	cfg.DataDir = filepath.Join(t.TempDir(), "never-made")
	cfg.MemoryQuota = "0"
	err = runMain(context.Background(), cfg, &bytes.Buffer{})
	require.ErrorContains(t, err, "--memory-quota must be > 0")
	require.NoDirExists(t, cfg.DataDir, "refused before anything started")
}
