package apply

import (
	"github.com/cozystack/cozy-aio/health"
)

// keyOf identifies an object regardless of the version it was applied
// with.
func keyOf(r health.ObjectRef) health.ObjectRef {
	r.Version = ""
	return r
}
