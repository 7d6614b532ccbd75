package sources

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	ctrl "sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/internal/egress"
	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/bucket"
)

type bucketReconciler struct{ s *Sources }

func (r *bucketReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := &sourcev1.Bucket{}
	return r.s.reconcileSource(ctx, req, sourcev1.BucketKind, obj,
		func(sobj source.Object) frame.Outcome { return r.reconcile(ctx, obj, sobj) },
		func() bool { return obj.Spec.Suspend },
		func(gen int64, handled string) {
			obj.Status.ObservedGeneration, obj.Status.LastHandledReconcileAt = gen, handled
		})
}

// bucketUnsupported names the fields of a Bucket the engine does not
// honour.
func BucketUnsupported(obj *sourcev1.Bucket) error {
	provider := obj.Spec.Provider
	return frame.Unsupported(sourcev1.BucketKind,
		frame.FieldCheck{Path: fmt.Sprintf("spec.provider (%s)", provider), Set: provider != "" && provider != sourcev1.BucketProviderGeneric},
		frame.FieldCheck{Path: "spec.sts", Set: obj.Spec.STS != nil},
		frame.FieldCheck{Path: "spec.serviceAccountName", Set: obj.Spec.ServiceAccountName != ""},
	)
}

func (r *bucketReconciler) reconcile(ctx context.Context, obj *sourcev1.Bucket, sobj source.Object) frame.Outcome {
	s := r.s
	if err := BucketUnsupported(obj); err != nil {
		return frame.Stalled(frame.UnsupportedFieldReason, fmt.Errorf("%s/%s/%s: %w", sourcev1.BucketKind, obj.Namespace, obj.Name, err))
	}
	opts, err := r.options(ctx, obj)
	if err != nil {
		return frame.Failed(sourcev1.AuthenticationFailedReason, err)
	}
	if a := obj.Status.Artifact; a != nil && s.deps.Stored(frame.StoreArtifact(a)) {
		if equalPtr(obj.Status.ObservedIgnore, obj.Spec.Ignore) {
			opts.LastRevision = a.Revision // built with the ignore rules asked for
		}
		opts.Reuse = frame.StoreArtifact(a)
	}
	res, err := bucket.Fetch(ctx, s.deps.Store, sobj, obj.Spec.BucketName, opts)
	if err != nil {
		return frame.Failed(sourcev1.BucketOperationFailedReason, err)
	}
	if res.Unchanged {
		return frame.Succeeded("stored artifact: revision '%s'", obj.Status.Artifact.Revision)
	}
	obj.Status.Artifact = frame.MetaArtifact(res.Artifact)
	obj.Status.URL = res.Artifact.URL
	obj.Status.ObservedIgnore = obj.Spec.Ignore
	if _, err := s.deps.Store.GC(ctx, sobj, res.Artifact); err != nil {
		return frame.Failed(meta.ArtifactFailedReason, fmt.Errorf("garbage-collecting old artifacts: %w", err))
	}
	return frame.Succeeded("stored artifact: revision '%s'", res.Artifact.Revision)
}

// options maps the Bucket's spec and Secrets to the fetch options, with
// Flux's Secret keys: accesskey and secretkey (secretRef), ca.crt, tls.crt
// and tls.key (certSecretRef), address, username and password
// (proxySecretRef).
func (r *bucketReconciler) options(ctx context.Context, obj *sourcev1.Bucket) (bucket.Options, error) {
	ref := fmt.Sprintf("%s/%s/%s", sourcev1.BucketKind, obj.Namespace, obj.Name)
	opts := bucket.Options{
		Server: bucket.Server{Endpoint: obj.Spec.Endpoint, Insecure: obj.Spec.Insecure, Region: obj.Spec.Region,
			Dial: r.s.deps.Dial},
		Prefix: obj.Spec.Prefix, Timeout: frame.DurationOr(obj.Spec.Timeout, 60*time.Second),
		Ignore: bucketIgnore(obj.Spec.Ignore),
	}
	// minio retries a refused dial ten times: refuse the endpoint first.
	if err := r.s.deps.Destinations.CheckURL(ctx, egress.Source, obj.Spec.Endpoint); err != nil {
		return opts, fmt.Errorf("%s: spec.endpoint: %w", ref, err)
	}
	if obj.Spec.SecretRef != nil {
		s, err := r.s.deps.Secret(ctx, ref, obj.Namespace, obj.Spec.SecretRef.Name)
		if err != nil {
			return opts, err
		}
		ak, okA := s.Data["accesskey"]
		sk, okS := s.Data["secretkey"]
		if !okA || !okS {
			return opts, fmt.Errorf("%s: invalid '%s' secret data: required fields 'accesskey' and 'secretkey'", ref, s.Name)
		}
		opts.AccessKey, opts.SecretKey = string(ak), string(sk)
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
			return opts, fmt.Errorf("%s: %w", ref, err)
		}
	}
	return opts, nil
}

// bucketIgnore passes spec.ignore line by line, untouched: Flux reads it
// with its sourceignore package, which the bucket package uses too.
func bucketIgnore(s *string) []string {
	if s == nil {
		return nil
	}
	return strings.Split(*s, "\n")
}

// rebuildBucket downloads the bucket with the reconciler's options and the
// ignore rules the artifact was built with. A bucket keeps no history: the
// rebuild succeeds only while the bucket still lists to revision, and
// otherwise fails until the leader records the new revision.
func (s *Sources) rebuildBucket(ctx context.Context, staging *source.Store, sobj source.Object, obj *sourcev1.Bucket, revision string) (source.Artifact, error) {
	opts, err := (&bucketReconciler{s: s}).options(ctx, obj)
	if err != nil {
		return source.Artifact{}, err
	}
	opts.Ignore = bucketIgnore(obj.Status.ObservedIgnore)
	release, err := s.deps.Slot(ctx)
	if err != nil {
		return source.Artifact{}, err
	}
	defer release()
	res, err := bucket.FetchRevision(ctx, staging, sobj, obj.Spec.BucketName, revision, opts)
	return res.Artifact, err
}
