package statuspage

import (
	"context"
	"sync"
	"time"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/cli-utils/pkg/object"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// InventoryObject is one object an object applied, with its health.
type InventoryObject struct {
	ID string `json:"id"`
	// Status is kstatus's: Current, InProgress, Failed, Terminating,
	// NotFound or Unknown; empty when it was not read (past
	// maxHealthReads, or on a remote cluster).
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
}

// Bounds of the health reads of one object's page.
const (
	// maxHealthReads objects are read for their health, the first of
	// the inventory; the rest are listed by ID.
	maxHealthReads = 50
	// healthTimeout bounds the reads together.
	healthTimeout = 5 * time.Second
	healthWorkers = 8
)

// health reads the first objects of an inventory from the API server and
// computes each one's kstatus. Objects on a remote cluster are listed
// without it: the page reads only its own cluster.
func (s *Server) health(ctx context.Context, ids []string, remote bool) []InventoryObject {
	out := make([]InventoryObject, len(ids))
	for i, id := range ids {
		out[i].ID = id
	}
	if remote {
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	n := min(len(ids), maxHealthReads)
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(healthWorkers, n) {
		wg.Go(func() {
			for i := range work {
				out[i].Status, out[i].Message = s.healthOf(ctx, ids[i])
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	return out
}

func (s *Server) healthOf(ctx context.Context, id string) (string, string) {
	m, err := object.ParseObjMetadata(id)
	if err != nil {
		return kstatus.UnknownStatus.String(), err.Error()
	}
	mapping, err := s.opts.Source.API.RESTMapper().RESTMapping(m.GroupKind)
	if err != nil {
		return kstatus.UnknownStatus.String(), err.Error()
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: m.GroupKind.Group, Version: mapping.GroupVersionKind.Version, Kind: m.GroupKind.Kind})
	if err := s.opts.Source.API.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Name}, u); err != nil {
		if apierrors.IsNotFound(err) {
			return kstatus.NotFoundStatus.String(), ""
		}
		return kstatus.UnknownStatus.String(), err.Error()
	}
	r, err := kstatus.Compute(u)
	if err != nil {
		return kstatus.UnknownStatus.String(), err.Error()
	}
	return r.Status.String(), r.Message
}
