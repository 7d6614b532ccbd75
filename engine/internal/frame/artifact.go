package frame

import (
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/cozy-aio/source"
)

// MetaArtifact converts a store artifact to Flux's status shape.
func MetaArtifact(a source.Artifact) *meta.Artifact {
	size := a.Size
	return &meta.Artifact{
		Path: a.Path, URL: a.URL, Revision: a.Revision, Digest: a.Digest,
		Size: &size, LastUpdateTime: metav1.NewTime(a.LastUpdateTime), Metadata: a.Metadata,
	}
}

// StoreArtifact converts Flux's status shape back to a store artifact.
func StoreArtifact(a *meta.Artifact) source.Artifact {
	out := source.Artifact{
		Path: a.Path, URL: a.URL, Revision: a.Revision, Digest: a.Digest,
		LastUpdateTime: a.LastUpdateTime.Time, Metadata: a.Metadata,
	}
	if a.Size != nil {
		out.Size = *a.Size
	}
	return out
}

// MaterializeRetry is when a dependent retries after a rebuild of the
// artifact it reads failed for a reason other than a digest mismatch
// (upstream unreachable, a rebuild still running).
const MaterializeRetry = 30 * time.Second

// WaitingError says a rebuild waits for one of its inputs (a source
// still being fetched): the unit waits, it has not failed.
type WaitingError struct{ Message string }

func (e *WaitingError) Error() string { return e.Message }
