package health

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ObjectStatus is the status of one object in a Report.
type ObjectStatus struct {
	Object  ObjectRef
	Status  Status
	Message string
}

// String returns "Kind/namespace/name: Status: message".
func (s ObjectStatus) String() string {
	if s.Message == "" {
		return s.Object.String() + ": " + string(s.Status)
	}
	return s.Object.String() + ": " + string(s.Status) + ": " + s.Message
}

// Report holds the status of every object of a wait, sorted by kind,
// namespace and name.
type Report struct {
	Objects []ObjectStatus
}

// Ready reports whether every object is Current.
func (r Report) Ready() bool {
	for _, o := range r.Objects {
		if o.Status != Current {
			return false
		}
	}
	return true
}

// NotReady returns the objects that are not Current.
func (r Report) NotReady() []ObjectStatus {
	var out []ObjectStatus
	for _, o := range r.Objects {
		if o.Status != Current {
			out = append(out, o)
		}
	}
	return out
}

// Status returns the status of ref in the report, and false when the
// report does not hold ref.
func (r Report) Status(ref ObjectRef) (ObjectStatus, bool) {
	for _, o := range r.Objects {
		if o.Object.groupKind() == ref.groupKind() && o.Object.Namespace == ref.Namespace && o.Object.Name == ref.Name {
			return o, true
		}
	}
	return ObjectStatus{}, false
}

// String returns one line per object that is not ready, or "all ready".
func (r Report) String() string {
	nr := r.NotReady()
	if len(nr) == 0 {
		return fmt.Sprintf("all %d objects ready", len(r.Objects))
	}
	lines := make([]string, len(nr))
	for i, o := range nr {
		lines[i] = o.String()
	}
	return strings.Join(lines, "\n")
}

func sortStatuses(s []ObjectStatus) {
	slices.SortFunc(s, func(a, b ObjectStatus) int {
		return cmp.Or(
			cmp.Compare(a.Object.Group, b.Object.Group),
			cmp.Compare(a.Object.Kind, b.Object.Kind),
			cmp.Compare(a.Object.Namespace, b.Object.Namespace),
			cmp.Compare(a.Object.Name, b.Object.Name),
		)
	})
}

// ErrTimeout means the wait's timeout passed before every object was ready.
var ErrTimeout = errors.New("timed out waiting for readiness")

// ErrUnreachable means the API server did not answer the wait's lists and
// watches for WaiterOptions.Unreachable.
var ErrUnreachable = errors.New("the API server is unreachable")

// ErrFailed means an object reported Failed and WaitOptions.FailFast was
// set.
var ErrFailed = errors.New("an object failed")

// NotReadyError is returned when a wait ends before every object is ready:
// Unwrap gives ErrTimeout, ErrFailed or the context's error, and Report says
// what is not ready and why.
type NotReadyError struct {
	Report Report
	Err    error
}

func (e *NotReadyError) Error() string {
	nr := e.Report.NotReady()
	const maxListed = 10
	parts := make([]string, 0, min(len(nr), maxListed))
	for i, o := range nr {
		if i == maxListed {
			parts = append(parts, fmt.Sprintf("and %d more", len(nr)-maxListed))
			break
		}
		parts = append(parts, o.String())
	}
	return fmt.Sprintf("%v: %d of %d objects not ready: %s", e.Err, len(nr), len(e.Report.Objects), strings.Join(parts, "; "))
}

func (e *NotReadyError) Unwrap() error { return e.Err }
