package sources

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	ctrl "sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/helmrepo"
	"github.com/cozystack/cozy-aio/source/oci"
)

// helmRepositoryReconciler fetches the index of an HTTP(S) Helm
// repository into an artifact, as Flux does; a repository of type oci has
// no artifact and is Ready when its registry answers.
type helmRepositoryReconciler struct{ s *Sources }

func (r *helmRepositoryReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := &sourcev1.HelmRepository{}
	res, err := r.s.reconcileSource(ctx, req, sourcev1.HelmRepositoryKind, obj,
		func(sobj source.Object) frame.Outcome { return r.reconcile(ctx, obj, sobj) },
		func() bool { return obj.Spec.Suspend },
		func(gen int64, handled string) {
			obj.Status.ObservedGeneration, obj.Status.LastHandledReconcileAt = gen, handled
		})
	if obj.Name == "" {
		// Deleted: reconcileSource removed its artifacts.
		r.s.deps.HelmRepos.Forget(source.Object{Kind: sourcev1.HelmRepositoryKind, Namespace: req.Namespace, Name: req.Name})
	} else if obj.Spec.URL != "" {
		// Charts whose dependency comes from this URL, and found no
		// HelmRepository for it, look again: from now on they wait on
		// this repository by name, through the shared cache.
		for _, d := range r.s.deps.Graph.Dependents(repositoryURLRef(obj.Namespace, obj.Spec.URL)) {
			r.s.deps.Enqueue(d)
		}
	}
	return res, err
}

// helmRepositoryUnsupported names the fields of a HelmRepository the
// engine does not honour.
func HelmRepositoryUnsupported(obj *sourcev1.HelmRepository) error {
	return frame.Unsupported(sourcev1.HelmRepositoryKind,
		frame.FieldCheck{Path: "spec.provider", Set: obj.Spec.Provider != "" && obj.Spec.Provider != sourcev1.GenericOCIProvider},
		frame.FieldCheck{Path: "spec.accessFrom", Set: obj.Spec.AccessFrom != nil},
	)
}

func (r *helmRepositoryReconciler) reconcile(ctx context.Context, obj *sourcev1.HelmRepository, sobj source.Object) frame.Outcome {
	s := r.s
	self := fmt.Sprintf("%s/%s/%s", sourcev1.HelmRepositoryKind, obj.Namespace, obj.Name)
	if err := HelmRepositoryUnsupported(obj); err != nil {
		return frame.Stalled(frame.UnsupportedFieldReason, err)
	}
	if obj.Spec.Type == sourcev1.HelmRepositoryTypeOCI {
		return r.reconcileOCI(ctx, obj, self)
	}
	if !strings.HasPrefix(obj.Spec.URL, "http://") && !strings.HasPrefix(obj.Spec.URL, "https://") {
		return frame.Stalled(sourcev1.URLInvalidReason, fmt.Errorf("%s: URL %q must start with http:// or https:// (or set type: oci)", self, obj.Spec.URL))
	}
	opts, err := s.helmRepoOptions(ctx, obj)
	if err != nil {
		return frame.Failed(sourcev1.AuthenticationFailedReason, err)
	}
	last := ""
	if a := obj.Status.Artifact; a != nil && s.storedIndex(frame.StoreArtifact(a)) {
		last = a.Digest
	}
	res, err := s.deps.HelmRepos.FetchIndex(ctx, s.deps.Store, sobj, obj.Spec.URL, last, opts)
	if err != nil {
		return frame.Failed(sourcev1.IndexationFailedReason, err)
	}
	if res.Unchanged {
		return indexStored(res.Digest)
	}
	obj.Status.Artifact = frame.MetaArtifact(res.Artifact)
	obj.Status.URL = res.Artifact.URL
	if _, err := s.deps.Store.GC(ctx, sobj, res.Artifact); err != nil {
		return frame.Failed(meta.ArtifactFailedReason, fmt.Errorf("garbage-collecting old artifacts: %w", err))
	}
	return indexStored(res.Artifact.Revision)
}

// indexStored is Flux's Ready condition of a HelmRepository.
func indexStored(revision string) frame.Outcome {
	o := frame.Succeeded("stored artifact: revision '%s'", revision)
	o.Reason = meta.SucceededReason
	return o
}

// storedIndex reports whether the index artifact status names is in the
// store under its digest.
func (s *Sources) storedIndex(a source.Artifact) bool {
	return s.deps.Store.Exists(a) && path.Base(a.Path) == "index-"+strings.TrimPrefix(a.Digest, "sha256:")+".yaml"
}

// reconcileOCI checks that the registry of an OCI repository answers. As
// in Flux, the repository has no artifact: HelmCharts pull from it.
func (r *helmRepositoryReconciler) reconcileOCI(ctx context.Context, obj *sourcev1.HelmRepository, self string) frame.Outcome {
	if !strings.HasPrefix(obj.Spec.URL, "oci://") {
		return frame.Stalled(sourcev1.URLInvalidReason, fmt.Errorf("%s: URL %q must start with oci:// for type oci", self, obj.Spec.URL))
	}
	reg, err := r.s.helmRepoRegistry(ctx, obj)
	if err != nil {
		return frame.Failed(sourcev1.AuthenticationFailedReason, err)
	}
	if err := oci.Ping(ctx, obj.Spec.URL, oci.Options{Registry: reg, Timeout: frame.DurationOr(obj.Spec.Timeout, 60*time.Second)}); err != nil {
		return frame.Failed(meta.FailedReason, fmt.Errorf("%s: %w", self, err))
	}
	obj.Status.Artifact = nil
	obj.Status.URL = ""
	o := frame.Succeeded("Helm repository is Ready")
	o.Reason = meta.SucceededReason
	return o
}

// helmRepoOptions reads how to reach an HTTP(S) repository from its
// Secrets: basic auth from secretRef (with a CA or client certificate
// there too, as Flux still accepts), TLS from certSecretRef.
func (s *Sources) helmRepoOptions(ctx context.Context, obj *sourcev1.HelmRepository) (helmrepo.Options, error) {
	ref := fmt.Sprintf("%s/%s/%s", sourcev1.HelmRepositoryKind, obj.Namespace, obj.Name)
	opts := helmrepo.Options{
		PassCredentials: obj.Spec.PassCredentials,
		Timeout:         frame.DurationOr(obj.Spec.Timeout, 60*time.Second),
		MaxIndexSize:    s.opts.HelmIndexMaxSize,
		MaxChartSize:    s.opts.HelmChartMaxSize,
		Dial:            s.deps.Dial,
	}
	if obj.Spec.SecretRef != nil {
		s, err := s.deps.Secret(ctx, ref, obj.Namespace, obj.Spec.SecretRef.Name)
		if err != nil {
			return opts, err
		}
		opts.Username, opts.Password = string(s.Data["username"]), string(s.Data["password"])
		if (opts.Username == "") != (opts.Password == "") {
			return opts, fmt.Errorf("%s: Secret %s/%s must hold both 'username' and 'password'", ref, s.Namespace, s.Name)
		}
		if len(s.Data["ca.crt"]) > 0 || len(s.Data["tls.crt"]) > 0 {
			if opts.TLSConfig, err = frame.TLSFromSecret(s); err != nil {
				return opts, fmt.Errorf("%s: %w", ref, err)
			}
		}
	}
	if obj.Spec.CertSecretRef != nil {
		s, err := s.deps.Secret(ctx, ref, obj.Namespace, obj.Spec.CertSecretRef.Name)
		if err != nil {
			return opts, err
		}
		if opts.TLSConfig, err = frame.TLSFromSecret(s); err != nil {
			return opts, fmt.Errorf("%s: %w", ref, err)
		}
	}
	return opts, nil
}

// helmRepoRegistry reads how to reach the registry of an OCI repository:
// a dockerconfigjson (or username/password) from secretRef, TLS from
// certSecretRef, plain HTTP with insecure.
func (s *Sources) helmRepoRegistry(ctx context.Context, obj *sourcev1.HelmRepository) (oci.Registry, error) {
	ref := fmt.Sprintf("%s/%s/%s", sourcev1.HelmRepositoryKind, obj.Namespace, obj.Name)
	reg := oci.Registry{PlainHTTP: obj.Spec.Insecure, Dial: s.deps.Dial}
	if obj.Spec.SecretRef != nil {
		s, err := s.deps.Secret(ctx, ref, obj.Namespace, obj.Spec.SecretRef.Name)
		if err != nil {
			return reg, err
		}
		reg.DockerConfigJSON = s.Data[".dockerconfigjson"]
		reg.Username, reg.Password = string(s.Data["username"]), string(s.Data["password"])
		if len(reg.DockerConfigJSON) == 0 && reg.Username == "" {
			return reg, fmt.Errorf("%s: Secret %s/%s has neither .dockerconfigjson nor username/password", ref, s.Namespace, s.Name)
		}
	}
	if obj.Spec.CertSecretRef != nil {
		s, err := s.deps.Secret(ctx, ref, obj.Namespace, obj.Spec.CertSecretRef.Name)
		if err != nil {
			return reg, err
		}
		if reg.TLSConfig, err = frame.TLSFromSecret(s); err != nil {
			return reg, fmt.Errorf("%s: %w", ref, err)
		}
	}
	return reg, nil
}
