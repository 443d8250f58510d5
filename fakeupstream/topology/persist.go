package topology

import "fmt"

// NextID is the id allocator's next value (region and peer ids).
func (t *Topology) NextID() uint64 { return t.nextID }

// Restore replaces the regions by a persisted set (a durable cluster
// reopened, DUR-9) and moves the id allocator to nextID, so no id is ever
// handed out twice. Stores stay as they are (all up). The set must cover
// the key space (Check), place peers on existing stores and keep every id
// below nextID; otherwise nothing changes and the error says why.
func (t *Topology) Restore(regions []Region, nextID uint64) error {
	old, oldNext := t.regions, t.nextID
	t.regions = make([]*Region, len(regions))
	for i := range regions {
		r := regions[i].clone()
		t.regions[i] = &r
	}
	t.nextID = nextID
	err := t.Check()
	for _, r := range t.regions {
		if err != nil {
			break
		}
		if r.ID >= nextID {
			err = fmt.Errorf("topology: restored region %d not below the next id %d", r.ID, nextID)
		}
		for _, p := range r.Peers {
			if _, ok := t.Store(p.StoreID); !ok {
				err = fmt.Errorf("topology: restored %s has a peer on unknown store %d", r, p.StoreID)
			}
			if p.ID >= nextID {
				err = fmt.Errorf("topology: restored peer %d not below the next id %d", p.ID, nextID)
			}
		}
	}
	if err != nil {
		t.regions, t.nextID = old, oldNext
		return err
	}
	return nil
}
