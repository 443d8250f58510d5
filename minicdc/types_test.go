package minicdc

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStartConfigValidate has one case per StartConfig rule
// (specs/minicdc.md, startup validation) and asserts the *ConfigError field.
//
// Rules M2 (DDLPollLimit), M3 (TableIDs), M4 (NextGen needs a keyspace).
func TestStartConfigValidate(t *testing.T) {
	valid := func() StartConfig {
		return StartConfig{StartTs: 100, TableIDs: []int64{101, 102}, DDLPollLimit: 32}
	}
	cases := []struct {
		name      string
		mutate    func(c *StartConfig)
		wantField string // "" = valid
		wantValue string
	}{
		{"valid classic", func(c *StartConfig) {}, "", ""},
		{"valid next-gen with keyspace", func(c *StartConfig) { c.NextGen = true; c.KeyspaceID = 7 }, "", ""},
		{"keyspace id ignored when not next-gen", func(c *StartConfig) { c.KeyspaceID = 0; c.NextGen = false }, "", ""},
		{"valid single table, start ts 0", func(c *StartConfig) { c.TableIDs = []int64{1}; c.StartTs = 0 }, "", ""},
		{"DDLPollLimit zero", func(c *StartConfig) { c.DDLPollLimit = 0 }, "DDLPollLimit", "0"},
		{"DDLPollLimit negative", func(c *StartConfig) { c.DDLPollLimit = -3 }, "DDLPollLimit", "-3"},
		// M3: an empty start set is valid (a host that picks tables up
		// from the DDL stream starts with none, M53).
		{"TableIDs nil", func(c *StartConfig) { c.TableIDs = nil }, "", ""},
		{"TableIDs empty", func(c *StartConfig) { c.TableIDs = []int64{} }, "", ""},
		{"TableIDs zero", func(c *StartConfig) { c.TableIDs = []int64{5, 0} }, "TableIDs[1]", "0"},
		{"TableIDs negative", func(c *StartConfig) { c.TableIDs = []int64{-9} }, "TableIDs[0]", "-9"},
		{"TableIDs duplicate", func(c *StartConfig) { c.TableIDs = []int64{5, 6, 5} }, "TableIDs[2]", "5"},
		{"NextGen without keyspace", func(c *StartConfig) { c.NextGen = true; c.KeyspaceID = 0 }, "KeyspaceID", "0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.mutate(&c)
			err := c.Validate()
			if tc.wantField == "" {
				require.NoError(t, err)
				return
			}
			var ce *ConfigError
			require.True(t, errors.As(err, &ce), "want *ConfigError, got %T %v", err, err)
			require.Equal(t, tc.wantField, ce.Field)
			require.Equal(t, tc.wantValue, ce.Value)
			require.NotEmpty(t, ce.Reason)
			require.Contains(t, err.Error(), tc.wantField)
		})
	}
}

// Rule M3: a duplicate names the index of the first occurrence.
func TestStartConfigDuplicateNamesFirstIndex(t *testing.T) {
	c := StartConfig{TableIDs: []int64{5, 6, 5}, DDLPollLimit: 1}
	var ce *ConfigError
	require.ErrorAs(t, c.Validate(), &ce)
	require.Contains(t, ce.Reason, "TableIDs[0]")
}
