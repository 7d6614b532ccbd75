package health

import (
	"fmt"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Status is the readiness of one object, in kstatus terms.
type Status string

// The statuses of an object.
const (
	// Current: the object is ready.
	Current Status = "Current"
	// InProgress: the object is being reconciled and may become ready.
	InProgress Status = "InProgress"
	// Failed: the object reports a failure.
	Failed Status = "Failed"
	// Terminating: the object is being deleted.
	Terminating Status = "Terminating"
	// NotFound: the object does not exist.
	NotFound Status = "NotFound"
	// Unknown: nothing has been observed yet, or the status could not be
	// computed.
	Unknown Status = "Unknown"
)

// Result is the computed status of one object and why.
type Result struct {
	Status  Status
	Message string
}

// Compute returns the kstatus status of u. It is a pure function: u must
// hold the object's full state, including its status.
func Compute(u *unstructured.Unstructured) (Result, error) {
	return (*Checker)(nil).Compute(u)
}

func computeKstatus(u *unstructured.Unstructured) (Result, error) {
	r, err := kstatus.Compute(u)
	if err != nil {
		return Result{Status: Unknown, Message: err.Error()}, fmt.Errorf("%s: computing status: %w", RefOf(u), err)
	}
	return Result{Status: Status(r.Status), Message: r.Message}, nil
}
