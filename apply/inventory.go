package apply

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/cozystack/cozy-aio/health"
)

// Inventory is the set of objects one owner (for example a Kustomization)
// applied, sorted and without duplicates. The zero value is empty.
type Inventory struct {
	Entries []health.ObjectRef
}

// NewInventory returns the inventory of refs. When one object appears with
// several versions, the last one wins.
func NewInventory(refs ...health.ObjectRef) Inventory {
	byKey := make(map[health.ObjectRef]health.ObjectRef, len(refs))
	for _, r := range refs {
		byKey[keyOf(r)] = r
	}
	entries := make([]health.ObjectRef, 0, len(byKey))
	for _, r := range byKey {
		entries = append(entries, r)
	}
	slices.SortFunc(entries, compareRefs)
	return Inventory{Entries: entries}
}

func compareRefs(a, b health.ObjectRef) int {
	return cmp.Or(
		cmp.Compare(a.Group, b.Group),
		cmp.Compare(a.Kind, b.Kind),
		cmp.Compare(a.Namespace, b.Namespace),
		cmp.Compare(a.Name, b.Name),
		cmp.Compare(a.Version, b.Version),
	)
}

// Contains reports whether the inventory holds r, whatever its version.
func (inv Inventory) Contains(r health.ObjectRef) bool {
	_, found := slices.BinarySearchFunc(inv.Entries, keyOf(r), func(e, k health.ObjectRef) int {
		return compareRefs(keyOf(e), k)
	})
	return found
}

// Stale returns the entries of inv that next no longer holds: the objects
// to prune after moving from inv to next. An object that only changed its
// API version is not stale.
func (inv Inventory) Stale(next Inventory) []health.ObjectRef {
	keep := make(map[health.ObjectRef]struct{}, len(next.Entries))
	for _, r := range next.Entries {
		keep[keyOf(r)] = struct{}{}
	}
	var stale []health.ObjectRef
	for _, r := range inv.Entries {
		if _, ok := keep[keyOf(r)]; !ok {
			stale = append(stale, r)
		}
	}
	return stale
}

// fluxInventory is the layout of Flux's status.inventory.
type fluxInventory struct {
	Entries []fluxInventoryEntry `json:"entries"`
}

type fluxInventoryEntry struct {
	ID      string `json:"id"`
	Version string `json:"v"`
}

// MarshalJSON writes the inventory in the layout of a Kustomization's
// status.inventory, {"entries":[{"id":"<ObjectRef.ID>","v":"<version>"}]},
// so that an inventory kept outside an object's status reads the same.
func (inv Inventory) MarshalJSON() ([]byte, error) {
	out := fluxInventory{Entries: make([]fluxInventoryEntry, len(inv.Entries))}
	for i, r := range inv.Entries {
		out.Entries[i] = fluxInventoryEntry{ID: r.ID(), Version: r.Version}
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (inv *Inventory) UnmarshalJSON(b []byte) error {
	var in fluxInventory
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	refs := make([]health.ObjectRef, 0, len(in.Entries))
	for _, e := range in.Entries {
		r, err := health.ParseID(e.ID, e.Version)
		if err != nil {
			return fmt.Errorf("reading an inventory: %w", err)
		}
		refs = append(refs, r)
	}
	*inv = NewInventory(refs...)
	return nil
}
