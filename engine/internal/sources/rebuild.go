package sources

import (
	"context"
	"errors"
	"fmt"
	"strings"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"

	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/git"
	"github.com/cozystack/cozy-aio/source/oci"
)

// rebuildGit fetches the commit of revision with the reconciler's options
// and the ignore rules the artifact was built with.
func (s *Sources) rebuildGit(ctx context.Context, staging *source.Store, sobj source.Object, obj *sourcev1.GitRepository, revision string) (source.Artifact, error) {
	opts, err := (&gitRepositoryReconciler{s: s}).options(ctx, obj)
	if err != nil {
		return source.Artifact{}, err
	}
	opts.Ignore = observedIgnore(obj.Status.ObservedIgnore)
	opts.SparseCheckout = obj.Status.ObservedSparseCheckout
	if len(obj.Spec.Include) > 0 || len(obj.Status.IncludedArtifacts) > 0 {
		self := frame.Ref{Kind: sourcev1.GitRepositoryKind, Namespace: obj.Namespace, Name: obj.Name}
		inc, out, ok := s.resolveIncludes(ctx, obj.DeepCopy(), self)
		if !ok {
			return source.Artifact{}, errors.New(out.Message)
		}
		defer inc.done()
		if !sameIncludes(obj.Status.IncludedArtifacts, inc.artifacts) {
			return source.Artifact{}, fmt.Errorf("%s: the included artifacts changed since %s was built; waiting for the leader to record the new artifact", self, revision)
		}
		opts.Include = inc.trees
	}
	release, err := s.deps.Slot(ctx)
	if err != nil {
		return source.Artifact{}, err
	}
	defer release()
	res, err := git.FetchRevision(ctx, staging, sobj, obj.Spec.URL, revision, opts)
	return res.Artifact, err
}

// rebuildOCI pulls the manifest of revision with the reconciler's options
// and the layer selector and ignore rules the artifact was built with.
func (s *Sources) rebuildOCI(ctx context.Context, staging *source.Store, sobj source.Object, obj *sourcev1.OCIRepository, revision string) (source.Artifact, error) {
	opts, err := (&ociRepositoryReconciler{s: s}).options(ctx, obj)
	if err != nil {
		return source.Artifact{}, err
	}
	opts.Ignore = observedIgnore(obj.Status.ObservedIgnore)
	opts.Layer = oci.LayerSelector{}
	if ls := obj.Status.ObservedLayerSelector; ls != nil {
		opts.Layer = oci.LayerSelector{MediaType: ls.MediaType, Operation: oci.Operation(ls.Operation)}
	}
	release, err := s.deps.Slot(ctx)
	if err != nil {
		return source.Artifact{}, err
	}
	defer release()
	res, err := oci.FetchRevision(ctx, staging, sobj, obj.Spec.URL, revision, opts)
	return res.Artifact, err
}

func observedIgnore(s *string) []string {
	if s == nil {
		return nil
	}
	return splitLines(*s)
}

func splitLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}
