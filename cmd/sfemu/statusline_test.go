package main

import (
	"testing"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
)

// SR13 (issue 18 item 2): a collection's status-line words: the lag of a
// defined safe_ts, "safe_ts=none" before one exists (never a lag from 0),
// and a rebuild in flight as such.
func TestCollectionWords(t *testing.T) {
	now := uint64(10_000) << 18
	for _, tc := range []struct {
		c    *apiv1.CollectionStatus
		want string
	}{
		{&apiv1.CollectionStatus{SafeTs: uint64(9_750) << 18}, "safe_ts_lag=250ms"},
		{&apiv1.CollectionStatus{SafeTs: uint64(10_500) << 18}, "safe_ts_lag=0s"},
		{&apiv1.CollectionStatus{}, "safe_ts=none"},
		{&apiv1.CollectionStatus{SafeTs: uint64(9_000) << 18, Rebuild: &apiv1.RebuildStatus{Generation: 14, ServingGeneration: 13, Percent: 35}}, "safe_ts_lag=1s rebuilding gen=14 35% serving=13"},
		{&apiv1.CollectionStatus{Rebuild: &apiv1.RebuildStatus{Generation: 2, ServingGeneration: 1}}, "safe_ts=none rebuilding gen=2 0% serving=1"},
	} {
		if got := collectionWords(tc.c, now); got != tc.want {
			t.Errorf("collectionWords(%v) = %q, want %q", tc.c, got, tc.want)
		}
	}
}
