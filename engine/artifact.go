package engine

import (
	"strings"

	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/cozy-aio/source"
)

// toMetaArtifact converts a store artifact to Flux's status shape.
func toMetaArtifact(a source.Artifact) *meta.Artifact {
	size := a.Size
	return &meta.Artifact{
		Path: a.Path, URL: a.URL, Revision: a.Revision, Digest: a.Digest,
		Size: &size, LastUpdateTime: metav1.NewTime(a.LastUpdateTime), Metadata: a.Metadata,
	}
}

// fromMetaArtifact converts Flux's status shape back to a store artifact.
func fromMetaArtifact(a *meta.Artifact) source.Artifact {
	out := source.Artifact{
		Path: a.Path, URL: a.URL, Revision: a.Revision, Digest: a.Digest,
		LastUpdateTime: a.LastUpdateTime.Time, Metadata: a.Metadata,
	}
	if a.Size != nil {
		out.Size = *a.Size
	}
	return out
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
