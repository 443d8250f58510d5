package sim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"google.golang.org/protobuf/proto"
)

// emuState is a digest of everything the emulator stored and serves:
// every collection's definition, lineage, state and counts, every live
// document (key, fields, commit ts, partition) and every partition's
// stream state. Two states with the same digest serve the same data; the
// storage faults compare the state a damaged or torn file reopens to with
// the state that was acknowledged (SIM17, SIM18).
func (w *world) emuState() (string, error) {
	ctx := context.Background()
	list, err := w.emu.ListCollections(ctx, &apiv1.ListCollectionsRequest{})
	if err != nil {
		return "", err
	}
	colls := list.GetCollections()
	sort.Slice(colls, func(i, j int) bool { return colls[i].GetDefinition().GetName() < colls[j].GetDefinition().GetName() })
	h := sha256.New()
	mo := proto.MarshalOptions{Deterministic: true}
	put := func(m proto.Message) error {
		b, err := mo.Marshal(m)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
		return nil
	}
	var parts []string
	for _, st := range colls {
		// The serving status minus what a reopen derives afresh
		// (modality progress, safe_ts, a rebuild in flight).
		if err := put(&apiv1.CollectionStatus{Definition: st.GetDefinition(), Lineage: st.GetLineage(), State: st.GetState(),
			DocCount: st.GetDocCount(), TombstoneCount: st.GetTombstoneCount()}); err != nil {
			return "", err
		}
		parts = append(parts, st.GetDefinition().GetSourcePartitions()...)
		if st.GetState() != apiv1.CollectionState_COLLECTION_STATE_ACTIVE {
			continue
		}
		name, after := st.GetDefinition().GetName(), ""
		for {
			docs, _, err := w.emu.Scan(ctx, name, nil, after, 500)
			if err != nil {
				return "", fmt.Errorf("scan %s: %w", name, err)
			}
			for _, d := range docs {
				if err := put(d); err != nil {
					return "", err
				}
			}
			if len(docs) < 500 {
				break
			}
			after = docs[len(docs)-1].GetPrimaryKey()
		}
	}
	sort.Strings(parts)
	if len(parts) > 0 {
		resp, err := w.emu.GetProgress(ctx, &apiv1.GetProgressRequest{SourcePartitions: parts})
		if err != nil {
			return "", err
		}
		ps := resp.GetPartitions()
		sort.Slice(ps, func(i, j int) bool { return ps[i].GetSourcePartition() < ps[j].GetSourcePartition() })
		for _, p := range ps {
			if err := put(p); err != nil {
				return "", err
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}
