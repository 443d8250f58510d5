// Package topology models PD's view of a TiKV cluster: numbered stores, and
// the key space cut into regions with ids, epochs and comparable
// (memcomparable EncodeBytes) boundaries, each placed on stores with one
// leader. Operations follow TiKV's epoch rules: split and merge bump the
// region version, peer changes bump conf_ver, a leader move bumps nothing.
//
// The package is pure and single-threaded; the cluster that owns it
// serialises access.
package topology

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/pingcap/kvproto/pkg/metapb"
)

// Peer is one replica of a region.
type Peer struct {
	ID      uint64
	StoreID uint64
}

// Region is a contiguous key range [StartKey, EndKey) in comparable form.
// An empty StartKey is -inf, an empty EndKey is +inf.
type Region struct {
	ID       uint64
	StartKey []byte
	EndKey   []byte
	ConfVer  uint64
	Version  uint64
	Peers    []Peer
	// Leader is the store holding the leader peer (0: no leader, every
	// peer's store is down).
	Leader uint64
}

// Contains reports whether comparable key k falls in the region.
func (r *Region) Contains(k []byte) bool {
	return bytes.Compare(k, r.StartKey) >= 0 && (len(r.EndKey) == 0 || bytes.Compare(k, r.EndKey) < 0)
}

// LeaderPeer returns the leader's peer (zero Peer if leaderless).
func (r *Region) LeaderPeer() Peer {
	for _, p := range r.Peers {
		if p.StoreID == r.Leader {
			return p
		}
	}
	return Peer{}
}

// HasPeerOn reports whether the region has a replica on store.
func (r *Region) HasPeerOn(store uint64) bool {
	for _, p := range r.Peers {
		if p.StoreID == store {
			return true
		}
	}
	return false
}

// Epoch returns the region epoch in kvproto form.
func (r *Region) Epoch() *metapb.RegionEpoch {
	return &metapb.RegionEpoch{ConfVer: r.ConfVer, Version: r.Version}
}

// Meta converts the region to PD's metapb form.
func (r *Region) Meta() *metapb.Region {
	m := &metapb.Region{
		Id:          r.ID,
		StartKey:    append([]byte(nil), r.StartKey...),
		EndKey:      append([]byte(nil), r.EndKey...),
		RegionEpoch: r.Epoch(),
	}
	for _, p := range r.Peers {
		m.Peers = append(m.Peers, &metapb.Peer{Id: p.ID, StoreId: p.StoreID})
	}
	return m
}

func (r *Region) clone() Region {
	c := *r
	c.StartKey = append([]byte(nil), r.StartKey...)
	c.EndKey = append([]byte(nil), r.EndKey...)
	c.Peers = append([]Peer(nil), r.Peers...)
	return c
}

func (r *Region) String() string {
	return fmt.Sprintf("region %d [%x, %x) epoch{conf_ver:%d version:%d} leader store %d",
		r.ID, r.StartKey, r.EndKey, r.ConfVer, r.Version, r.Leader)
}

// Store is one TiKV node.
type Store struct {
	ID uint64
	Up bool
}

// Topology is the set of stores and regions.
type Topology struct {
	regions []*Region // sorted by StartKey, contiguous
	stores  []Store   // sorted by ID
	nextID  uint64
}

// New builds a cluster of nStores stores (ids 1..nStores) and one region
// covering the whole key space with replicas on the first `replicas` stores
// and the leader on store 1. Ids of regions and peers come from one
// allocator, as in PD.
func New(nStores, replicas int) (*Topology, error) {
	if nStores < 1 || replicas < 1 || replicas > nStores {
		return nil, fmt.Errorf("topology: need 1 <= replicas (%d) <= stores (%d)", replicas, nStores)
	}
	t := &Topology{nextID: 1}
	for i := 1; i <= nStores; i++ {
		t.stores = append(t.stores, Store{ID: uint64(i), Up: true})
	}
	r := &Region{ID: t.alloc(), ConfVer: 1, Version: 1, Leader: 1}
	for i := 1; i <= replicas; i++ {
		r.Peers = append(r.Peers, Peer{ID: t.alloc(), StoreID: uint64(i)})
	}
	t.regions = []*Region{r}
	return t, nil
}

func (t *Topology) alloc() uint64 {
	id := t.nextID
	t.nextID++
	return id
}

// Stores returns a copy of the stores.
func (t *Topology) Stores() []Store { return append([]Store(nil), t.stores...) }

// Store returns store id.
func (t *Topology) Store(id uint64) (Store, bool) {
	for _, s := range t.stores {
		if s.ID == id {
			return s, true
		}
	}
	return Store{}, false
}

// Regions returns copies of all regions in key order.
func (t *Topology) Regions() []Region {
	out := make([]Region, len(t.regions))
	for i, r := range t.regions {
		out[i] = r.clone()
	}
	return out
}

// Region returns a copy of region id.
func (t *Topology) Region(id uint64) (Region, bool) {
	if r := t.find(id); r != nil {
		return r.clone(), true
	}
	return Region{}, false
}

func (t *Topology) find(id uint64) *Region {
	for _, r := range t.regions {
		if r.ID == id {
			return r
		}
	}
	return nil
}

func (t *Topology) indexOf(id uint64) int {
	for i, r := range t.regions {
		if r.ID == id {
			return i
		}
	}
	return -1
}

// locateIdx returns the index of the region containing comparable key k.
func (t *Topology) locateIdx(k []byte) int {
	// First region whose StartKey > k, minus one.
	i := sort.Search(len(t.regions), func(i int) bool { return bytes.Compare(t.regions[i].StartKey, k) > 0 })
	return i - 1
}

// Locate returns a copy of the region containing comparable key k.
func (t *Topology) Locate(k []byte) Region { return t.regions[t.locateIdx(k)].clone() }

// LocateID returns the id of the region containing comparable key k
// without copying it.
func (t *Topology) LocateID(k []byte) uint64 { return t.regions[t.locateIdx(k)].ID }

// Overlapping returns copies of the regions intersecting [start, end)
// (comparable; empty end = +inf), in key order.
func (t *Topology) Overlapping(start, end []byte) []Region {
	var out []Region
	for i := t.locateIdx(start); i < len(t.regions); i++ {
		r := t.regions[i]
		if len(end) > 0 && bytes.Compare(r.StartKey, end) >= 0 {
			break
		}
		out = append(out, r.clone())
	}
	return out
}

// Split cuts region id at comparable key k, which must lie strictly inside
// it. As TiKV does by default (right-derive), the existing id keeps the right
// part [k, end) and a new region takes the left part [start, k); both get
// version+1 and the new region gets fresh peer ids on the same stores with
// the same leader store.
func (t *Topology) Split(id uint64, k []byte) (left, right Region, err error) {
	i := t.indexOf(id)
	if i < 0 {
		return Region{}, Region{}, fmt.Errorf("topology: split: region %d not found", id)
	}
	r := t.regions[i]
	if bytes.Compare(k, r.StartKey) <= 0 || (len(r.EndKey) > 0 && bytes.Compare(k, r.EndKey) >= 0) {
		return Region{}, Region{}, fmt.Errorf("topology: split key %x not strictly inside %s", k, r)
	}
	r.Version++
	n := &Region{
		ID:       t.alloc(),
		StartKey: r.StartKey,
		EndKey:   append([]byte(nil), k...),
		ConfVer:  r.ConfVer,
		Version:  r.Version,
		Leader:   r.Leader,
	}
	for _, p := range r.Peers {
		n.Peers = append(n.Peers, Peer{ID: t.alloc(), StoreID: p.StoreID})
	}
	r.StartKey = append([]byte(nil), k...)
	t.regions = append(t.regions, nil)
	copy(t.regions[i+1:], t.regions[i:])
	t.regions[i] = n
	return n.clone(), r.clone(), nil
}

// Merge folds region source into its neighbour target. As in TiKV,
// PrepareMerge bumps the source's conf_ver and version, and CommitMerge sets
// the target's version to max(source, target)+1. The source id disappears.
func (t *Topology) Merge(source, target uint64) (Region, error) {
	si, ti := t.indexOf(source), t.indexOf(target)
	if si < 0 || ti < 0 {
		return Region{}, fmt.Errorf("topology: merge %d into %d: region not found", source, target)
	}
	if si != ti+1 && si != ti-1 {
		return Region{}, fmt.Errorf("topology: merge %d into %d: regions are not adjacent", source, target)
	}
	s, tg := t.regions[si], t.regions[ti]
	s.ConfVer++
	s.Version++
	tg.Version = max(s.Version, tg.Version) + 1
	if si < ti {
		tg.StartKey = s.StartKey
	} else {
		tg.EndKey = s.EndKey
	}
	t.regions = append(t.regions[:si], t.regions[si+1:]...)
	return tg.clone(), nil
}

// TransferLeader moves the leader of region id to store. The epoch does not
// change (a leader change is not a configuration change).
func (t *Topology) TransferLeader(id, store uint64) error {
	r := t.find(id)
	if r == nil {
		return fmt.Errorf("topology: transfer leader: region %d not found", id)
	}
	if !r.HasPeerOn(store) {
		return fmt.Errorf("topology: transfer leader of region %d: no peer on store %d", id, store)
	}
	if s, _ := t.Store(store); !s.Up {
		return fmt.Errorf("topology: transfer leader of region %d: store %d is down", id, store)
	}
	r.Leader = store
	return nil
}

// AddPeer adds a replica of region id on store (conf_ver+1).
func (t *Topology) AddPeer(id, store uint64) error {
	r := t.find(id)
	if r == nil {
		return fmt.Errorf("topology: add peer: region %d not found", id)
	}
	if _, ok := t.Store(store); !ok {
		return fmt.Errorf("topology: add peer to region %d: store %d not found", id, store)
	}
	if r.HasPeerOn(store) {
		return fmt.Errorf("topology: add peer: region %d already has a peer on store %d", id, store)
	}
	r.Peers = append(r.Peers, Peer{ID: t.alloc(), StoreID: store})
	r.ConfVer++
	return nil
}

// RemovePeer removes the replica of region id on store (conf_ver+1). The
// leader's replica cannot be removed; move the leader first, as PD does.
func (t *Topology) RemovePeer(id, store uint64) error {
	r := t.find(id)
	if r == nil {
		return fmt.Errorf("topology: remove peer: region %d not found", id)
	}
	if r.Leader == store {
		return fmt.Errorf("topology: remove peer: store %d holds the leader of region %d", store, id)
	}
	for i, p := range r.Peers {
		if p.StoreID == store {
			r.Peers = append(r.Peers[:i], r.Peers[i+1:]...)
			r.ConfVer++
			return nil
		}
	}
	return fmt.Errorf("topology: remove peer: region %d has no peer on store %d", id, store)
}

// SetStoreUp marks a store up or down. Taking a store down re-elects, for
// every region led there, the up peer on the lowest store id (no leader if
// none is up); it returns the ids of regions whose leader changed.
func (t *Topology) SetStoreUp(store uint64, up bool) ([]uint64, error) {
	idx := -1
	for i := range t.stores {
		if t.stores[i].ID == store {
			idx = i
		}
	}
	if idx < 0 {
		return nil, fmt.Errorf("topology: store %d not found", store)
	}
	t.stores[idx].Up = up
	var moved []uint64
	for _, r := range t.regions {
		if up && r.Leader == 0 && r.HasPeerOn(store) {
			r.Leader = store
			moved = append(moved, r.ID)
		}
		if up || r.Leader != store {
			continue
		}
		r.Leader = 0
		best := uint64(0)
		for _, p := range r.Peers {
			if s, _ := t.Store(p.StoreID); s.Up && (best == 0 || p.StoreID < best) {
				best = p.StoreID
			}
		}
		r.Leader = best
		moved = append(moved, r.ID)
	}
	return moved, nil
}

// Check verifies the invariants: regions are sorted, start at -inf, end at
// +inf, and each region's end is the next one's start (full coverage, no
// overlap); every region has a leader among its peers or none at all.
func (t *Topology) Check() error {
	if len(t.regions) == 0 {
		return fmt.Errorf("topology: no regions")
	}
	if len(t.regions[0].StartKey) != 0 {
		return fmt.Errorf("topology: first region %d starts at %x, not -inf", t.regions[0].ID, t.regions[0].StartKey)
	}
	seen := map[uint64]bool{}
	for i, r := range t.regions {
		if seen[r.ID] {
			return fmt.Errorf("topology: duplicate region id %d", r.ID)
		}
		seen[r.ID] = true
		if len(r.EndKey) > 0 && bytes.Compare(r.StartKey, r.EndKey) >= 0 {
			return fmt.Errorf("topology: empty or inverted %s", r)
		}
		if i+1 < len(t.regions) {
			if len(r.EndKey) == 0 || !bytes.Equal(r.EndKey, t.regions[i+1].StartKey) {
				return fmt.Errorf("topology: gap or overlap between %s and %s", r, t.regions[i+1])
			}
		} else if len(r.EndKey) != 0 {
			return fmt.Errorf("topology: last %s does not end at +inf", r)
		}
		if r.Leader != 0 && !r.HasPeerOn(r.Leader) {
			return fmt.Errorf("topology: %s has a leader without a peer", r)
		}
	}
	return nil
}
