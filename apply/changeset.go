package apply

import (
	"strings"

	"github.com/cozystack/cozy-aio/health"
)

// Action is what Apply or Prune did to one object.
type Action string

// The actions of a ChangeSet.
const (
	// Created: the object did not exist and was created.
	Created Action = "created"
	// Configured: the object existed and the write changed it (this
	// includes a drift correction and a re-creation after an immutable-field
	// change; Change.Detail says which).
	Configured Action = "configured"
	// Unchanged: the object already matched; nothing was written.
	Unchanged Action = "unchanged"
	// Deleted: the object was pruned.
	Deleted Action = "deleted"
	// Skipped: the object was left alone; Change.Detail says why.
	Skipped Action = "skipped"
)

// Change is the action taken on one object.
type Change struct {
	Object health.ObjectRef
	Action Action
	// Detail explains a Skipped action or a re-creation; empty otherwise.
	Detail string
}

// String returns "Kind/namespace/name action" and the detail, if any.
func (c Change) String() string {
	s := c.Object.String() + " " + string(c.Action)
	if c.Detail != "" {
		s += " (" + c.Detail + ")"
	}
	return s
}

// ChangeSet is the result of Apply or Prune: one Change per object, in the
// order the objects were handled (stage by stage, then input order).
type ChangeSet struct {
	Changes []Change
}

// Count returns how many changes have action a.
func (cs ChangeSet) Count(a Action) int {
	n := 0
	for _, c := range cs.Changes {
		if c.Action == a {
			n++
		}
	}
	return n
}

// Changed reports whether any object was created, configured or deleted.
func (cs ChangeSet) Changed() bool {
	for _, c := range cs.Changes {
		switch c.Action {
		case Created, Configured, Deleted:
			return true
		}
	}
	return false
}

// Inventory returns the inventory of the objects the change set applied:
// everything except deleted and skipped objects. As in Flux, an object
// skipped by SSAAnnotation leaves the inventory; pass Skipped to
// Inventory.Stale's caller so that it is not pruned either.
func (cs ChangeSet) Inventory() Inventory {
	refs := make([]health.ObjectRef, 0, len(cs.Changes))
	for _, c := range cs.Changes {
		if c.Action != Deleted && c.Action != Skipped {
			refs = append(refs, c.Object)
		}
	}
	return NewInventory(refs...)
}

// Stale returns the objects of previous that this change set neither
// applied nor skipped: what pruning may delete. An object skipped by
// SSAAnnotation is out of the inventory but never pruned, as in Flux.
func (cs ChangeSet) Stale(previous Inventory) []health.ObjectRef {
	var skipped []health.ObjectRef
	for _, c := range cs.Changes {
		if c.Action == Skipped {
			skipped = append(skipped, c.Object)
		}
	}
	keep := NewInventory(append(skipped, cs.Inventory().Entries...)...)
	return previous.Stale(keep)
}

// Log returns what changed, one "Kind/namespace/name action" line per
// object created, configured or deleted (for Skipped too with skipped),
// as kustomize-controller's change-set events list them; empty when
// nothing changed.
func (cs ChangeSet) Log(skipped bool) string {
	var lines []string
	for _, c := range cs.Changes {
		switch c.Action {
		case Created, Configured, Deleted:
		case Skipped:
			if !skipped {
				continue
			}
		default:
			continue
		}
		lines = append(lines, c.Object.String()+" "+string(c.Action))
	}
	return strings.Join(lines, "\n")
}

// String returns one line per change.
func (cs ChangeSet) String() string {
	var b strings.Builder
	for _, c := range cs.Changes {
		b.WriteString(c.String())
		b.WriteByte('\n')
	}
	return b.String()
}
