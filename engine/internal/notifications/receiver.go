package notifications

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	notifyv1 "github.com/fluxcd/notification-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	ctrl "sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/notify"
)

// reconcileReceiver reads a Receiver's token, serves its webhook path and
// writes the path to status.webhookPath with Ready. It runs on every
// replica (each serves webhooks); only the leader writes status.
func (n *Notifier) reconcileReceiver(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := &notifyv1.Receiver{}
	if err := n.deps.Manager.GetClient().Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			n.unserveReceiver(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if obj.Spec.Suspend || !obj.DeletionTimestamp.IsZero() {
		n.unserveReceiver(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	start := time.Now()
	orig := obj.DeepCopy()
	out := n.receiverOutcome(ctx, obj)
	if !out.Ready {
		n.unserveReceiver(req.NamespacedName)
	}
	obj.Status.ObservedGeneration = obj.Generation
	obj.Status.LastHandledReconcileAt = frame.HandledRequest(obj)
	return n.deps.Finisher.Finish(ctx, notifyv1.ReceiverKind, obj, orig, start, out, frame.Timing{Interval: obj.GetInterval(), Retry: time.Minute})
}

func (n *Notifier) unserveReceiver(ref types.NamespacedName) {
	if n.webhooks != nil {
		n.webhooks.DeleteReceiver(ref)
	}
}

func (n *Notifier) receiverOutcome(ctx context.Context, obj *notifyv1.Receiver) frame.Outcome {
	filtered := false
	for _, r := range obj.Spec.Resources {
		filtered = filtered || r.Filter != ""
	}
	if err := frame.Unsupported(notifyv1.ReceiverKind,
		frame.FieldCheck{Path: "spec.type " + obj.Spec.Type, Set: !slices.Contains(notify.ReceiverTypes, obj.Spec.Type)},
		frame.FieldCheck{Path: "spec.resourceFilter", Set: obj.Spec.ResourceFilter != ""},
		frame.FieldCheck{Path: "spec.resources[].filter", Set: filtered},
		frame.FieldCheck{Path: "spec.oidcProviders", Set: len(obj.Spec.OIDCProviders) > 0},
	); err != nil {
		return frame.Stalled(frame.UnsupportedFieldReason, err)
	}
	if n.deps.Restricted {
		for _, r := range obj.Spec.Resources {
			if r.Namespace != "" && r.Namespace != obj.Namespace {
				return frame.Stalled(notifyv1.ValidationFailedReason, fmt.Errorf("Receiver/%s/%s: resource %s/%s/%s: cross-namespace references are disabled",
					obj.Namespace, obj.Name, r.Kind, r.Namespace, r.Name))
			}
		}
	}
	if obj.Spec.SecretRef == nil {
		return frame.Stalled(notifyv1.TokenNotFoundReason, fmt.Errorf("Receiver/%s/%s: spec.secretRef is required", obj.Namespace, obj.Name))
	}
	s, err := n.deps.Secret(ctx, "Receiver/"+obj.Namespace+"/"+obj.Name+" spec.secretRef", obj.Namespace, obj.Spec.SecretRef.Name)
	if err != nil {
		return frame.Failed(notifyv1.TokenNotFoundReason, err)
	}
	token := string(s.Data["token"])
	if token == "" {
		return frame.Failed(notifyv1.TokenNotFoundReason, fmt.Errorf("Receiver/%s/%s: Secret %s/%s has no key 'token'",
			obj.Namespace, obj.Name, s.Namespace, s.Name))
	}
	path := notify.WebhookPath(token, obj.Name, obj.Namespace)
	obj.Status.WebhookPath = path
	if n.webhooks == nil {
		return frame.Succeeded("Receiver initialized for path: %s (the webhook server is off: set --webhook-addr)", path)
	}
	n.webhooks.SetReceiver(client.ObjectKeyFromObject(obj), path, notify.Receiver{Type: obj.Spec.Type, Token: token, Events: obj.Spec.Events})
	return frame.Succeeded("Receiver initialized for path: %s", path)
}

// triggerReceiver requests a reconcile of every resource of a Receiver, by
// setting reconcile.fluxcd.io/requestedAt, as Flux does.
func (n *Notifier) triggerReceiver(ctx context.Context, ref types.NamespacedName) error {
	obj := &notifyv1.Receiver{}
	if err := n.deps.Manager.GetClient().Get(ctx, ref, obj); err != nil {
		return err
	}
	now := time.Now().Format(time.RFC3339Nano)
	var errs []error
	for _, r := range obj.Spec.Resources {
		ns := r.Namespace
		if ns == "" {
			ns = obj.Namespace
		}
		if err := n.requestReconcile(ctx, r.CrossNamespaceObjectReference, ns, now); err != nil {
			errs = append(errs, fmt.Errorf("Receiver/%s/%s: %s/%s/%s: %w", ref.Namespace, ref.Name, r.Kind, ns, r.Name, err))
		}
	}
	return errors.Join(errs...)
}

// requestReconcile annotates the resource (or, for name "*", every object
// of the kind in ns with the labels) with requestedAt.
func (n *Notifier) requestReconcile(ctx context.Context, r notifyv1.CrossNamespaceObjectReference, ns, requestedAt string) error {
	gvk, err := n.resourceGVK(r)
	if err != nil {
		return err
	}
	var names []string
	if r.Name == "*" {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := n.deps.Manager.GetAPIReader().List(ctx, list, client.InNamespace(ns), client.MatchingLabels(r.MatchLabels)); err != nil {
			return err
		}
		for _, it := range list.Items {
			names = append(names, it.Name)
		}
	} else {
		names = []string{r.Name}
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, meta.ReconcileRequestAnnotation, requestedAt)
	for _, name := range names {
		o := &metav1.PartialObjectMetadata{}
		o.SetGroupVersionKind(gvk)
		o.SetNamespace(ns)
		o.SetName(name)
		if err := n.deps.Manager.GetClient().Patch(ctx, o, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return err
		}
	}
	return nil
}

// resourceGVK resolves a Receiver resource's kind: its apiVersion when
// set, else the version the engine reconciles.
func (n *Notifier) resourceGVK(r notifyv1.CrossNamespaceObjectReference) (schema.GroupVersionKind, error) {
	if r.APIVersion != "" {
		gv, err := schema.ParseGroupVersion(r.APIVersion)
		if err != nil {
			return schema.GroupVersionKind{}, err
		}
		return gv.WithKind(r.Kind), nil
	}
	obj, ok := n.deps.NewObject(r.Kind)
	if !ok {
		return schema.GroupVersionKind{}, fmt.Errorf("apiVersion must be set for kind %s", r.Kind)
	}
	return apiutil.GVKForObject(obj, n.deps.Manager.GetScheme())
}
