package sources

import (
	"context"
	"net"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/internal/egress"
	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/helmrepo"
)

// Options are the engine's options the sources follow.
type Options struct {
	// HelmIndexMaxSize and HelmChartMaxSize bound a repository index and
	// a chart (bytes); zero: helmrepo's defaults.
	HelmIndexMaxSize int64
	HelmChartMaxSize int64
}

// Deps is what the sources use of the engine.
type Deps struct {
	// Client reads and writes through the engine's cache; APIReader reads
	// the API server directly.
	Client    client.Client
	APIReader client.Reader
	// Store keeps the artifacts.
	Store *source.Store
	// Finisher writes each reconcile's outcome.
	Finisher *frame.Finisher
	// Graph learns what each HelmChart and GitRepository waits on.
	Graph *frame.Graph
	// Secret reads a Secret a source names.
	Secret func(ctx context.Context, referrer, namespace, name string) (*corev1.Secret, error)
	// Dial dials every fetch through the egress policy's source class;
	// Destinations is that policy.
	Dial         func(ctx context.Context, network, addr string) (net.Conn, error)
	Destinations egress.Policy
	// HelmRepos fetches Helm repository indexes and charts, sharing
	// downloads across HelmCharts.
	HelmRepos *helmrepo.Client
	// Stored tells whether the store holds an artifact.
	Stored func(source.Artifact) bool
	// SourceArtifact resolves the artifact of a source another source
	// reads (a GitRepository's includes, a HelmChart's Git or Bucket).
	SourceArtifact func(ctx context.Context, self frame.Ref, kind, namespace, name string) (source.Artifact, frame.Outcome, bool)
	// Enqueue asks for a reconcile of a unit.
	Enqueue func(frame.Ref)
	// Slot bounds the rebuilds in flight.
	Slot func(context.Context) (func(), error)
}

// Sources reconciles Flux's source kinds: GitRepository, OCIRepository,
// Bucket, HelmRepository and HelmChart, as source-controller does.
type Sources struct {
	deps Deps
	opts Options
}

// New returns the source reconcilers.
func New(d Deps, o Options) *Sources { return &Sources{deps: d, opts: o} }

// Kinds registers each source kind's reconciler and, for the kinds whose
// artifact units read, its rebuild: as the object's reconciler built it
// (its options, ignore rules, layer selector and includes as status
// records them), for a replica or a restart whose store lacks it.
func (s *Sources) Kinds() []frame.Registration {
	return []frame.Registration{
		{Kind: sourcev1.GitRepositoryKind, Reconciler: &gitRepositoryReconciler{s: s}, Rebuild: frame.RebuildAs(s.rebuildGit)},
		{Kind: sourcev1.OCIRepositoryKind, Reconciler: &ociRepositoryReconciler{s: s}, Rebuild: frame.RebuildAs(s.rebuildOCI)},
		{Kind: sourcev1.BucketKind, Reconciler: &bucketReconciler{s: s}, Rebuild: frame.RebuildAs(s.rebuildBucket)},
		{Kind: sourcev1.HelmRepositoryKind, Reconciler: &helmRepositoryReconciler{s: s}},
		{Kind: sourcev1.HelmChartKind, Reconciler: &helmChartReconciler{s: s}, Rebuild: frame.RebuildAs(s.rebuildHelmChart)},
	}
}
