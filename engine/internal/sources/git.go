package sources

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	ctrl "sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/git"
)

type gitRepositoryReconciler struct{ s *Sources }

func (r *gitRepositoryReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := &sourcev1.GitRepository{}
	return r.s.reconcileSource(ctx, req, sourcev1.GitRepositoryKind, obj,
		func(sobj source.Object) frame.Outcome { return r.reconcile(ctx, obj, sobj) },
		func() bool { return obj.Spec.Suspend },
		func(gen int64, handled string) {
			obj.Status.ObservedGeneration, obj.Status.LastHandledReconcileAt = gen, handled
		})
}

func (r *gitRepositoryReconciler) reconcile(ctx context.Context, obj *sourcev1.GitRepository, sobj source.Object) frame.Outcome {
	s := r.s
	if err := GitRepositoryUnsupported(obj); err != nil {
		return frame.Stalled(frame.UnsupportedFieldReason, err)
	}
	opts, err := r.options(ctx, obj)
	if err != nil {
		return frame.Failed(sourcev1.AuthenticationFailedReason, err)
	}
	gv, err := r.gitVerificationFor(ctx, obj)
	if out, refused := verificationRefused(obj, err); refused {
		return out
	}
	if gv != nil {
		opts.Verify = gv.verify
	}
	self := frame.Ref{Kind: sourcev1.GitRepositoryKind, Namespace: obj.Namespace, Name: obj.Name}
	inc, out, ok := s.resolveIncludes(ctx, obj, self)
	if !ok {
		return out
	}
	defer inc.done()
	opts.Include = inc.trees
	if a := obj.Status.Artifact; a != nil && s.deps.Stored(frame.StoreArtifact(a)) &&
		equalPtr(obj.Status.ObservedIgnore, obj.Spec.Ignore) && slices.Equal(obj.Status.ObservedSparseCheckout, obj.Spec.SparseCheckout) &&
		sameIncludes(obj.Status.IncludedArtifacts, inc.artifacts) && gv.current(obj) {
		// The artifact was built with the rules and includes the spec
		// asks for: an unchanged revision needs no fetch.
		opts.LastRevision = a.Revision
	}
	res, err := git.Fetch(ctx, s.deps.Store, sobj, obj.Spec.URL, opts)
	if out, refused := verificationRefused(obj, err); refused {
		return out
	}
	if err != nil {
		return frame.Failed(sourcev1.GitOperationFailedReason, err)
	}
	gv.record(obj)
	if res.Unchanged {
		return frame.Succeeded("stored artifact for revision '%s'", obj.Status.Artifact.Revision)
	}
	obj.Status.Artifact = frame.MetaArtifact(res.Artifact)
	obj.Status.ObservedIgnore = obj.Spec.Ignore
	obj.Status.ObservedSparseCheckout = obj.Spec.SparseCheckout
	obj.Status.IncludedArtifacts = inc.artifacts
	if _, err := s.deps.Store.GC(ctx, sobj, res.Artifact); err != nil {
		return frame.Failed(meta.ArtifactFailedReason, fmt.Errorf("garbage-collecting old artifacts: %w", err))
	}
	return frame.Succeeded("stored artifact for revision '%s'", res.Artifact.Revision)
}

func (r *gitRepositoryReconciler) options(ctx context.Context, obj *sourcev1.GitRepository) (git.Options, error) {
	ref := fmt.Sprintf("GitRepository/%s/%s", obj.Namespace, obj.Name)
	opts := git.Options{Timeout: frame.DurationOr(obj.Spec.Timeout, 60*time.Second), Dial: r.s.deps.Dial}
	if rf := obj.Spec.Reference; rf != nil {
		opts.Ref = git.Ref{Branch: rf.Branch, Tag: rf.Tag, SemVer: rf.SemVer, Name: rf.Name, Commit: rf.Commit}
	}
	if obj.Spec.Ignore != nil {
		opts.Ignore = splitLines(*obj.Spec.Ignore)
	}
	opts.SparseCheckout = obj.Spec.SparseCheckout
	if obj.Spec.SecretRef != nil {
		s, err := r.s.deps.Secret(ctx, ref, obj.Namespace, obj.Spec.SecretRef.Name)
		if err != nil {
			return opts, err
		}
		opts.Auth = git.Auth{
			Username: string(s.Data["username"]), Password: string(s.Data["password"]),
			BearerToken:   string(s.Data["bearerToken"]),
			SSHPrivateKey: s.Data["identity"], SSHPassphrase: string(s.Data["password"]),
			KnownHosts: s.Data["known_hosts"],
		}
		opts.CABundle = s.Data["ca.crt"]
		if len(opts.Auth.SSHPrivateKey) > 0 {
			opts.Auth.Username, opts.Auth.Password = "", ""
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

// gitRepositoryUnsupported names the spec fields of obj that are set and not honoured.
func GitRepositoryUnsupported(obj *sourcev1.GitRepository) error {
	return frame.Unsupported(sourcev1.GitRepositoryKind,
		frame.FieldCheck{Path: "spec.recurseSubmodules", Set: obj.Spec.RecurseSubmodules},
		frame.FieldCheck{Path: "spec.provider", Set: obj.Spec.Provider != "" && obj.Spec.Provider != sourcev1.GitProviderGeneric},
		frame.FieldCheck{Path: "spec.serviceAccountName", Set: obj.Spec.ServiceAccountName != ""},
	)
}

// equalPtr reports whether two optional values are both unset or equal.
func equalPtr[T comparable](a, b *T) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}
