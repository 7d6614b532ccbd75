package apply

import (
	"github.com/cozystack/cozy-aio/health"
)

// ObjectRef is health.ObjectRef, cozy-aio's one object reference.
//
// Deprecated: use health.ObjectRef. The alias only keeps engine/waits.go
// building until it names health.ObjectRef itself (#20).
type ObjectRef = health.ObjectRef

// keyOf identifies an object regardless of the version it was applied
// with.
func keyOf(r health.ObjectRef) health.ObjectRef {
	r.Version = ""
	return r
}
