package helm

import (
	"context"
	"errors"
	"fmt"
	"time"

	"helm.sh/helm/v4/pkg/kube"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"

	"github.com/cozystack/cozy-aio/health"
)

// readyWhenApplied waits only for the objects whose readiness kstatus
// reads from their status; the others (ConfigMaps, Secrets, RBAC, a
// ClusterIP Service…) are Current the moment they exist, which the apply
// that precedes the wait has just shown. Deletion and hook waits are
// unchanged.
type readyWhenApplied struct {
	kube.Waiter
	ctx     context.Context
	health  *health.Waiter
	checker *health.Checker
}

func (w readyWhenApplied) Wait(rl kube.ResourceList, timeout time.Duration) error {
	return w.wait(rl, timeout, false)
}

func (w readyWhenApplied) WaitWithJobs(rl kube.ResourceList, timeout time.Duration) error {
	return w.wait(rl, timeout, true)
}

// wait waits for the objects that need it; without jobs, Jobs are not
// waited for (Helm's Wait and WaitWithJobs).
func (w readyWhenApplied) wait(rl kube.ResourceList, timeout time.Duration, jobs bool) error {
	rest := needsWait(rl)
	if len(rest) == 0 {
		return nil
	}
	fallback := func() error {
		if jobs {
			return w.Waiter.WaitWithJobs(rest, timeout)
		}
		return w.Waiter.Wait(rest, timeout)
	}
	if w.health == nil {
		return fallback()
	}
	var refs []health.ObjectRef
	for _, info := range rest {
		u, err := asUnstructured(info)
		if err != nil {
			return fallback()
		}
		// As Helm's waiter: a paused Deployment is not waited for.
		if paused, _, _ := unstructured.NestedBool(u.Object, "spec", "paused"); paused && u.GetKind() == "Deployment" {
			continue
		}
		if !jobs && u.GroupVersionKind().GroupKind() == (schema.GroupKind{Group: "batch", Kind: "Job"}) {
			continue
		}
		ref := health.RefOf(u)
		if ref.Namespace == "" {
			ref.Namespace = info.Namespace
		}
		refs = append(refs, ref)
	}
	if len(refs) == 0 {
		return nil
	}
	if timeout <= 0 {
		timeout = kube.DefaultStatusWatcherTimeout
	}
	report, err := w.health.Wait(w.ctx, refs, health.WaitOptions{Timeout: timeout, Checker: w.checker})
	if err == nil {
		return nil
	}
	var errs []error
	for _, o := range report.NotReady() {
		errs = append(errs, fmt.Errorf("resource %s/%s/%s not ready. status: %s, message: %s",
			o.Object.Kind, o.Object.Namespace, o.Object.Name, o.Status, o.Message))
	}
	return errors.Join(append(errs, err)...)
}

// currentOnceApplied are the kinds without a status that kstatus reads:
// they are Current whenever they exist.
var currentOnceApplied = map[string]bool{
	"/ConfigMap": true, "/Secret": true, "/ServiceAccount": true,
	"/LimitRange": true, "/Endpoints": true,
	"rbac.authorization.k8s.io/Role": true, "rbac.authorization.k8s.io/RoleBinding": true,
	"rbac.authorization.k8s.io/ClusterRole": true, "rbac.authorization.k8s.io/ClusterRoleBinding": true,
	"scheduling.k8s.io/PriorityClass": true, "storage.k8s.io/StorageClass": true,
	"networking.k8s.io/IngressClass": true, "node.k8s.io/RuntimeClass": true,
}

func needsWait(rl kube.ResourceList) kube.ResourceList {
	var out kube.ResourceList
	for _, info := range rl {
		if info == nil || info.Object == nil {
			out = append(out, info)
			continue
		}
		gvk := gvkOf(info)
		key := gvk.Group + "/" + gvk.Kind
		if currentOnceApplied[key] {
			continue
		}
		// A Service is Current at once unless it waits for a load balancer.
		if key == "/Service" {
			if u, err := asUnstructured(info); err == nil {
				if t, _, _ := unstructured.NestedString(u.Object, "spec", "type"); t != "LoadBalancer" {
					continue
				}
			}
		}
		out = append(out, info)
	}
	return out
}

// gvkOf is the kind of a built object: from its REST mapping, as typed
// objects decoded by Helm's builder may carry no TypeMeta.
func gvkOf(info *resource.Info) schema.GroupVersionKind {
	if info.Mapping != nil {
		return info.Mapping.GroupVersionKind
	}
	return info.Object.GetObjectKind().GroupVersionKind()
}

// asUnstructured returns a built object as unstructured, with its kind.
func asUnstructured(info *resource.Info) (*unstructured.Unstructured, error) {
	if info == nil || info.Object == nil {
		return nil, errors.New("no object")
	}
	if u, ok := info.Object.(*unstructured.Unstructured); ok {
		if u.GetKind() == "" {
			u = u.DeepCopy()
			u.SetGroupVersionKind(gvkOf(info))
		}
		return u, nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(info.Object)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvkOf(info))
	if u.GetNamespace() == "" {
		u.SetNamespace(info.Namespace)
	}
	if u.GetName() == "" {
		u.SetName(info.Name)
	}
	return u, nil
}
