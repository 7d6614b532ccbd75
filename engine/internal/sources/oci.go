package sources

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	ctrl "sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/oci"
)

type ociRepositoryReconciler struct{ s *Sources }

func (r *ociRepositoryReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := &sourcev1.OCIRepository{}
	return r.s.reconcileSource(ctx, req, sourcev1.OCIRepositoryKind, obj,
		func(sobj source.Object) frame.Outcome { return r.reconcile(ctx, obj, sobj) },
		func() bool { return obj.Spec.Suspend },
		func(gen int64, handled string) {
			obj.Status.ObservedGeneration, obj.Status.LastHandledReconcileAt = gen, handled
		})
}

func (r *ociRepositoryReconciler) reconcile(ctx context.Context, obj *sourcev1.OCIRepository, sobj source.Object) frame.Outcome {
	s := r.s
	if err := OCIRepositoryUnsupported(obj); err != nil {
		return frame.Stalled(frame.UnsupportedFieldReason, err)
	}
	if !strings.HasPrefix(obj.Spec.URL, "oci://") {
		return frame.Stalled(sourcev1.URLInvalidReason, fmt.Errorf("OCIRepository/%s/%s: URL %q must start with oci://", obj.Namespace, obj.Name, obj.Spec.URL))
	}
	opts, err := r.options(ctx, obj)
	if err != nil {
		return frame.Failed(sourcev1.AuthenticationFailedReason, err)
	}
	ov, err := s.ociVerificationFor(ctx, fmt.Sprintf("OCIRepository/%s/%s", obj.Namespace, obj.Name), obj.Namespace, obj.Spec.Verify)
	if out, refused := verificationRefused(obj, err); refused {
		return out
	}
	if ov == nil {
		conditions.Delete(obj, sourcev1.SourceVerifiedCondition)
		obj.Status.SourceVerificationFingerprint = ""
	} else {
		opts.Verify = ov.verifier(opts.Registry)
	}
	if a := obj.Status.Artifact; a != nil && s.deps.Stored(frame.StoreArtifact(a)) &&
		equalPtr(obj.Status.ObservedIgnore, obj.Spec.Ignore) && equalPtr(obj.Status.ObservedLayerSelector, obj.Spec.LayerSelector) &&
		ov.current(obj, obj.Generation, obj.Status.SourceVerificationFingerprint) {
		// Built with the rules the spec asks for: an unchanged digest
		// needs no pull.
		opts.LastRevision = a.Revision
	}
	res, err := oci.Fetch(ctx, s.deps.Store, sobj, obj.Spec.URL, opts)
	if out, refused := verificationRefused(obj, err); refused {
		return out
	}
	if err != nil {
		return frame.Failed(sourcev1.OCIPullFailedReason, err)
	}
	if ov != nil && ov.verified {
		ov.record(obj, res.Revision.String, &obj.Status.SourceVerificationFingerprint)
	}
	if res.Unchanged {
		return frame.Succeeded("stored artifact for digest '%s'", obj.Status.Artifact.Revision)
	}
	obj.Status.Artifact = frame.MetaArtifact(res.Artifact)
	obj.Status.URL = res.Artifact.URL
	obj.Status.ObservedIgnore = obj.Spec.Ignore
	obj.Status.ObservedLayerSelector = obj.Spec.LayerSelector
	if _, err := s.deps.Store.GC(ctx, sobj, res.Artifact); err != nil {
		return frame.Failed(meta.ArtifactFailedReason, fmt.Errorf("garbage-collecting old artifacts: %w", err))
	}
	return frame.Succeeded("stored artifact for digest '%s'", res.Artifact.Revision)
}

func (r *ociRepositoryReconciler) options(ctx context.Context, obj *sourcev1.OCIRepository) (oci.Options, error) {
	ref := fmt.Sprintf("OCIRepository/%s/%s", obj.Namespace, obj.Name)
	opts := oci.Options{Registry: oci.Registry{PlainHTTP: obj.Spec.Insecure, Dial: r.s.deps.Dial},
		Timeout: frame.DurationOr(obj.Spec.Timeout, 60*time.Second)}
	if rf := obj.Spec.Reference; rf != nil {
		opts.Ref = oci.Ref{Tag: rf.Tag, SemVer: rf.SemVer, SemVerFilter: rf.SemverFilter, Digest: rf.Digest}
	}
	if ls := obj.Spec.LayerSelector; ls != nil {
		opts.Layer = oci.LayerSelector{MediaType: ls.MediaType, Operation: oci.Operation(ls.Operation)}
	}
	if obj.Spec.Ignore != nil {
		opts.Ignore = splitLines(*obj.Spec.Ignore)
	}
	if obj.Spec.SecretRef != nil {
		s, err := r.s.deps.Secret(ctx, ref, obj.Namespace, obj.Spec.SecretRef.Name)
		if err != nil {
			return opts, err
		}
		opts.DockerConfigJSON = s.Data[".dockerconfigjson"]
		if len(opts.DockerConfigJSON) == 0 {
			return opts, fmt.Errorf("%s: Secret %s/%s has no .dockerconfigjson", ref, s.Namespace, s.Name)
		}
	}
	if obj.Spec.CertSecretRef != nil {
		s, err := r.s.deps.Secret(ctx, ref, obj.Namespace, obj.Spec.CertSecretRef.Name)
		if err != nil {
			return opts, err
		}
		if opts.TLSConfig, err = frame.TLSFromSecret(s); err != nil {
			return opts, fmt.Errorf("%s: %w", ref, err)
		}
	}
	if obj.Spec.ProxySecretRef != nil {
		s, err := r.s.deps.Secret(ctx, ref, obj.Namespace, obj.Spec.ProxySecretRef.Name)
		if err != nil {
			return opts, err
		}
		if opts.ProxyURL, err = frame.ProxyURL(s); err != nil {
			return opts, err
		}
	}
	return opts, nil
}

// ociRepositoryUnsupported names the spec fields of obj that are set and not honoured.
func OCIRepositoryUnsupported(obj *sourcev1.OCIRepository) error {
	return frame.Unsupported(sourcev1.OCIRepositoryKind,
		frame.FieldCheck{Path: "spec.verify without secretRef (keyless cosign)", Set: obj.Spec.Verify != nil && obj.Spec.Verify.SecretRef == nil && obj.Spec.Verify.Provider != "notation"},
		frame.FieldCheck{Path: "spec.verify.trustedRootSecretRef", Set: obj.Spec.Verify != nil && obj.Spec.Verify.TrustedRootSecretRef != nil},
		frame.FieldCheck{Path: "spec.provider", Set: obj.Spec.Provider != "" && obj.Spec.Provider != sourcev1.GenericOCIProvider},
		frame.FieldCheck{Path: "spec.serviceAccountName", Set: obj.Spec.ServiceAccountName != ""},
	)
}
