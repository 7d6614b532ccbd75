package apply

import (
	"context"
	"fmt"
	"strings"
	"time"

	ssautils "github.com/fluxcd/pkg/ssa/utils"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/health"
)

// waitForCRDs waits until every CRD among objs is established and its kind
// resolves through the REST mapper, so the next stage can apply custom
// resources of it.
func (a *Applier) waitForCRDs(ctx context.Context, objs []*unstructured.Unstructured, timeout time.Duration) error {
	for _, o := range objs {
		if !ssautils.IsCRD(o) {
			continue
		}
		ref := health.RefOf(o)
		var last string
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			crd := &unstructured.Unstructured{}
			crd.SetGroupVersionKind(o.GroupVersionKind())
			if err := a.client.Get(ctx, client.ObjectKey{Name: o.GetName()}, crd); err != nil {
				last = err.Error()
				return false, nil
			}
			if !crdEstablished(crd) {
				last = "not established yet"
				return false, nil
			}
			group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
			kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
			if _, err := a.mapper.RESTMapping(schema.GroupKind{Group: group, Kind: kind}); err != nil {
				if meta.IsNoMatchError(err) {
					last = "not yet in API discovery"
					return false, nil
				}
				return false, err
			}
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("%s: waiting for the CRD to be established (%s): %w", ref, last, err)
		}
	}
	return nil
}

func crdEstablished(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && strings.EqualFold(fmt.Sprint(m["status"]), "True") {
			return true
		}
	}
	return false
}
