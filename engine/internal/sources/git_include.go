package sources

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"

	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/git"
)

// gitIncludes are the resolved spec.include entries of a GitRepository:
// the included artifacts, as status.includedArtifacts records them, and
// their extracted trees for git.Options.Include.
type gitIncludes struct {
	artifacts []*meta.Artifact
	trees     []git.Include
	done      func()
}

// resolveIncludes reads the artifact of each included GitRepository (same
// namespace, as Flux) and extracts it. An include that does not exist or
// has no artifact yet fails the GitRepository with IncludeUnavailable
// naming it, as source-controller does; the engine wakes it when the
// include gets its artifact (the includes are edges of the graph).
func (s *Sources) resolveIncludes(ctx context.Context, obj *sourcev1.GitRepository, self frame.Ref) (gitIncludes, frame.Outcome, bool) {
	inc := gitIncludes{done: func() {}}
	var refs []frame.Ref
	for _, in := range obj.Spec.Include {
		refs = append(refs, frame.Ref{Kind: sourcev1.GitRepositoryKind, Namespace: obj.Namespace, Name: in.GitRepositoryRef.Name})
	}
	s.deps.Graph.Set(self, refs)
	if len(refs) == 0 {
		conditions.Delete(obj, sourcev1.IncludeUnavailableCondition)
		return inc, frame.Outcome{}, true
	}
	if cyc := s.deps.Graph.Cycle(self); cyc != nil {
		out := frame.Stalled(frame.DependencyCycleReason, fmt.Errorf("%s: spec.include is on a cycle: %v", self, cyc))
		conditions.MarkTrue(obj, sourcev1.IncludeUnavailableCondition, frame.DependencyCycleReason, "%s", out.Message)
		return inc, out, false
	}
	tmp, err := os.MkdirTemp("", "cozy-include-")
	if err != nil {
		return inc, frame.Failed(meta.ArtifactFailedReason, err), false
	}
	var roots []*os.Root
	inc.done = func() {
		for _, r := range roots {
			r.Close()
		}
		os.RemoveAll(tmp)
	}
	for i, in := range obj.Spec.Include {
		name := in.GitRepositoryRef.Name
		art, out, ok := s.deps.SourceArtifact(ctx, self, sourcev1.GitRepositoryKind, obj.Namespace, name)
		if !ok {
			inc.done()
			out.Message = fmt.Sprintf("include '%s' is unavailable: %s", name, out.Message)
			conditions.MarkTrue(obj, sourcev1.IncludeUnavailableCondition, out.Reason, "%s", out.Message)
			return gitIncludes{done: func() {}}, out, false
		}
		dir := filepath.Join(tmp, fmt.Sprint(i))
		if err := s.deps.Store.Extract(ctx, art, dir, source.ExtractOptions{}); err != nil {
			inc.done()
			return gitIncludes{done: func() {}}, frame.Failed(meta.ArtifactFailedReason, fmt.Errorf("%s: extracting include '%s': %w", self, name, err)), false
		}
		root, err := os.OpenRoot(dir)
		if err != nil {
			inc.done()
			return gitIncludes{done: func() {}}, frame.Failed(meta.ArtifactFailedReason, err), false
		}
		roots = append(roots, root)
		inc.artifacts = append(inc.artifacts, frame.MetaArtifact(art))
		inc.trees = append(inc.trees, git.Include{Name: name, FS: root.FS(), FromPath: in.GetFromPath(), ToPath: in.GetToPath()})
	}
	conditions.Delete(obj, sourcev1.IncludeUnavailableCondition)
	return inc, frame.Outcome{}, true
}

// sameIncludes reports whether the artifacts included last time are the
// ones included now (by revision and digest, in order), so that an
// unchanged commit needs no new artifact.
func sameIncludes(last, now []*meta.Artifact) bool {
	if len(last) != len(now) {
		return false
	}
	for i := range last {
		if last[i] == nil || now[i] == nil || last[i].Digest != now[i].Digest || last[i].Revision != now[i].Revision {
			return false
		}
	}
	return true
}
