package apply

import (
	"cmp"
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
func NewInventory(refs ...ObjectRef) Inventory {
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
