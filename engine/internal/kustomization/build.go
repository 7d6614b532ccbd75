package kustomization

import (
	"context"
	"fmt"
	"os"
	"strings"

	securejoin "github.com/cyphar/filepath-securejoin"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	fluxkustomize "github.com/fluxcd/pkg/kustomize"
	"github.com/fluxcd/pkg/ssa/normalize"
	ssautils "github.com/fluxcd/pkg/ssa/utils"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kusttypes "sigs.k8s.io/kustomize/api/types"

	"github.com/cozystack/cozy-aio/apply"
	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/health"
	"github.com/cozystack/cozy-aio/source"
)

// build extracts the artifact, builds spec.path with kustomize and Flux's
// overlay of the spec, substitutes post-build variables and sets the
// common metadata, in kustomize-controller's order.
func (r *Reconciler) build(ctx context.Context, obj *kustomizev1.Kustomization, self frame.Ref, art source.Artifact) ([]*unstructured.Unstructured, frame.Outcome, bool) {
	tmp, err := os.MkdirTemp("", "cozy-build-")
	if err != nil {
		return nil, frame.Failed(meta.BuildFailedReason, err), false
	}
	defer os.RemoveAll(tmp)
	if err := r.deps.Store.Extract(ctx, art, tmp, source.ExtractOptions{}); err != nil {
		return nil, frame.Failed(meta.ArtifactFailedReason, fmt.Errorf("%s: extracting artifact %s: %w", self, art.Revision, err)), false
	}
	dir, err := securejoin.SecureJoin(tmp, obj.Spec.Path)
	if err != nil {
		return nil, frame.Stalled(meta.InvalidPathReason, fmt.Errorf("%s: path %q: %w", self, obj.Spec.Path, err)), false
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, frame.Failed(meta.InvalidPathReason, fmt.Errorf("%s: path %q not found in revision %s", self, obj.Spec.Path, art.Revision)), false
	}
	// Flux's own generator writes the overlay of the spec's kustomize
	// fields (targetNamespace, namePrefix/Suffix, patches, images,
	// components, buildMetadata) into the extracted copy, or generates the
	// kustomization.yaml when there is none, so the build renders what
	// kustomize-controller renders.
	spec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, frame.Failed(meta.BuildFailedReason, fmt.Errorf("%s: %w", self, err)), false
	}
	if _, err := fluxkustomize.NewGenerator(tmp, unstructured.Unstructured{Object: spec}).WriteFile(dir); err != nil {
		return nil, frame.Failed(meta.BuildFailedReason, fmt.Errorf("%s: generating the kustomization: %w", self, relPaths(err, tmp))), false
	}
	bopts := apply.BuildOptions{Root: tmp, AllowRemoteBases: r.opts.AllowRemoteBases && !r.opts.Restricted}
	if obj.Spec.Decryption != nil {
		hook, out, ok := r.decryption(ctx, obj, self, tmp, dir)
		if !ok {
			return nil, out, false
		}
		bopts.Decrypt = hook
	}
	if pb := obj.Spec.PostBuild; pb != nil {
		vars, err := r.substitutions(ctx, obj, self)
		if err != nil {
			return nil, frame.Failed(meta.BuildFailedReason, err), false
		}
		bopts.Substitute = &apply.SubstituteOptions{
			Vars:   vars,
			Strict: r.opts.StrictSubstitutions,
			Always: obj.GetSubstituteStrategy() == kustomizev1.SubstituteStrategyAlways,
		}
	}
	objs, err := apply.Build(ctx, dir, bopts)
	if err != nil && bopts.Decrypt != nil && isDecryptError(err) {
		return nil, decryptFailed(self, err), false
	}
	if err != nil {
		return nil, frame.Failed(meta.BuildFailedReason, fmt.Errorf("%s: %w", self, relPaths(err, tmp))), false
	}
	for _, i := range apply.UnusedImages(objs, obj.Spec.Images) {
		// kustomize ignores an override that matches nothing; a warning
		// tells, and the build goes on.
		r.deps.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, frame.UnusedImageReason, "Reconcile",
			"%s: spec.images[%d] %q matches no image of the rendered objects, the override has no effect", self, i, obj.Spec.Images[i].Name)
	}
	r.warnUnmatchedPatches(ctx, obj, self, dir, bopts)
	for _, o := range objs {
		// As Flux: ciphertext is never applied as a Secret's data.
		if _, sops, _ := unstructured.NestedFieldNoCopy(o.Object, "sops"); sops && o.GetKind() == "Secret" && o.GetAPIVersion() == "v1" {
			return nil, frame.Failed(meta.ReconciliationFailedReason, fmt.Errorf("%s: %s is SOPS encrypted, configuring decryption is required for this secret to be reconciled",
				self, health.RefOf(o))), false
		}
	}
	if r.opts.Restricted {
		for _, o := range objs {
			if o.GetNamespace() != "" && o.GetNamespace() != obj.Namespace && obj.Spec.TargetNamespace == "" {
				return nil, frame.Stalled(meta.BuildFailedReason, fmt.Errorf("%s: object %s/%s/%s is in another namespace: %w",
					self, o.GetKind(), o.GetNamespace(), o.GetName(), frame.ErrCrossNamespace)), false
			}
		}
	}
	// As kustomize-controller, with Flux's own normalize: native kinds
	// round-trip through their types (Service and container ports get
	// their protocol, a Secret's stringData becomes data), so that what is
	// applied, and the fields it owns, are byte for byte what Flux applies:
	// a switch from Flux, or back, writes nothing. After the checks above,
	// which read fields the types drop (a Secret's sops).
	if err := normalize.UnstructuredList(objs); err != nil {
		return nil, frame.Failed(meta.BuildFailedReason, fmt.Errorf("%s: %w", self, err)), false
	}
	if cm := obj.Spec.CommonMetadata; cm != nil {
		ssautils.SetCommonMetadata(objs, cm.Labels, cm.Annotations)
	}
	return objs, frame.Outcome{}, true
}

// warnUnmatchedPatches records a Warning Event for each spec.patches
// entry whose target selects no object: kustomize (and Flux) apply it to
// nothing and say nothing, so the build goes on as Flux's would.
func (r *Reconciler) warnUnmatchedPatches(ctx context.Context, obj *kustomizev1.Kustomization, self frame.Ref, dir string, bopts apply.BuildOptions) {
	targets := make([]*kusttypes.Selector, len(obj.Spec.Patches))
	for i, p := range obj.Spec.Patches {
		targets[i] = frame.KustomizeSelector(p.Target)
	}
	bopts.Decrypt, bopts.Substitute = nil, nil
	idx, err := apply.UnmatchedPatchTargets(ctx, dir, bopts, targets)
	if err != nil {
		r.deps.Logger().V(1).Info("checking patch targets", "kustomization", self.String(), "error", err.Error())
		return
	}
	for _, i := range idx {
		r.deps.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, frame.UnmatchedPatchReason, "Reconcile",
			"%s: spec.patches[%d] target %s matches no object, the patch has no effect", self, i, frame.DescribeSelector(obj.Spec.Patches[i].Target))
	}
}

// relPaths hides the temporary directory in build errors, so that they
// name files as the user knows them.
func relPaths(err error, tmp string) error {
	return fmt.Errorf("%s", strings.ReplaceAll(err.Error(), tmp+"/", ""))
}

// substitutions merges postBuild.substituteFrom (in order) and then
// postBuild.substitute, later values winning.
func (r *Reconciler) substitutions(ctx context.Context, obj *kustomizev1.Kustomization, self frame.Ref) (map[string]string, error) {
	vars := map[string]string{}
	for _, ref := range obj.Spec.PostBuild.SubstituteFrom {
		key := client.ObjectKey{Namespace: obj.Namespace, Name: ref.Name}
		var data map[string]string
		switch ref.Kind {
		case "ConfigMap":
			var cm corev1.ConfigMap
			if err := r.deps.Client.Get(ctx, key, &cm); err != nil {
				if ref.Optional && client.IgnoreNotFound(err) == nil {
					continue
				}
				return nil, fmt.Errorf("%s: substituteFrom ConfigMap %s: %w", self, key, err)
			}
			data = cm.Data
		case "Secret":
			var s corev1.Secret
			if err := r.deps.Client.Get(ctx, key, &s); err != nil {
				if ref.Optional && client.IgnoreNotFound(err) == nil {
					continue
				}
				return nil, fmt.Errorf("%s: substituteFrom Secret %s: %w", self, key, err)
			}
			data = map[string]string{}
			for k, v := range s.Data {
				data[k] = string(v)
			}
		default:
			return nil, fmt.Errorf("%s: substituteFrom kind %q must be ConfigMap or Secret", self, ref.Kind)
		}
		for k, v := range data {
			vars[k] = v
		}
	}
	for k, v := range obj.Spec.PostBuild.Substitute {
		vars[k] = v
	}
	return vars, nil
}

func inventoryOf(inv *kustomizev1.ResourceInventory) apply.Inventory {
	var refs []health.ObjectRef
	for _, e := range inv.Entries {
		if r, err := health.ParseID(e.ID, e.Version); err == nil {
			refs = append(refs, r)
		}
	}
	return apply.NewInventory(refs...)
}

func toFluxInventory(inv apply.Inventory) *kustomizev1.ResourceInventory {
	out := &kustomizev1.ResourceInventory{Entries: make([]kustomizev1.ResourceRef, 0, len(inv.Entries))}
	for _, r := range inv.Entries {
		out.Entries = append(out.Entries, kustomizev1.ResourceRef{ID: r.ID(), Version: r.Version})
	}
	return out
}
