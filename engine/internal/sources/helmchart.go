package sources

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrl "sigs.k8s.io/controller-runtime/pkg/reconcile"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	helmindex "helm.sh/helm/v4/pkg/repo/v1"

	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/helmrepo"
	"github.com/cozystack/cozy-aio/source/oci"
)

// Reasons of HelmChart failures, as Flux's source-controller writes them.
const (
	chartPullErrorReason    = "ChartPullError"
	chartPackageErrorReason = "ChartPackageError"
)

// Media types of a Helm chart layer in an OCI registry, current and legacy.
const (
	helmChartLayerMediaType       = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
	legacyHelmChartLayerMediaType = "application/tar+gzip"
)

// chartSourceKinds are the kinds a HelmChart's spec.sourceRef may name,
// as the HelmChart CRD enumerates them.
var chartSourceKinds = []string{sourcev1.HelmRepositoryKind, sourcev1.GitRepositoryKind, sourcev1.BucketKind}

// helmChartReconciler stores a chart as an artifact: pulled from a
// HelmRepository (HTTP index or OCI registry), or packaged from a path of
// a GitRepository or Bucket artifact.
type helmChartReconciler struct{ s *Sources }

func (r *helmChartReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := &sourcev1.HelmChart{}
	res, err := r.s.reconcileSource(ctx, req, sourcev1.HelmChartKind, obj,
		func(sobj source.Object) frame.Outcome { return r.reconcile(ctx, obj, sobj) },
		func() bool { return obj.Spec.Suspend },
		func(gen int64, handled string) {
			obj.Status.ObservedGeneration, obj.Status.LastHandledReconcileAt = gen, handled
		})
	if obj.Name == "" {
		r.s.deps.Graph.Remove(frame.Ref{Kind: sourcev1.HelmChartKind, Namespace: req.Namespace, Name: req.Name})
	}
	return res, err
}

// builtChart is a chart archive ready to store, or the news that the
// stored one still holds.
type builtChart struct {
	unchanged      bool
	data           []byte
	name, version  string
	sourceRevision string
	packaged       bool
	valuesFiles    []string
	// verified is true when spec.verify checked the chart's signature.
	verified bool
}

// helmChartUnsupported names the fields of a HelmChart the engine does
// not honour.
func HelmChartUnsupported(obj *sourcev1.HelmChart) error {
	return frame.Unsupported(sourcev1.HelmChartKind,
		frame.FieldCheck{Path: "spec.verify without secretRef (keyless cosign)", Set: obj.Spec.Verify != nil && obj.Spec.Verify.SecretRef == nil && obj.Spec.Verify.Provider != "notation"},
	)
}

func (r *helmChartReconciler) reconcile(ctx context.Context, obj *sourcev1.HelmChart, sobj source.Object) frame.Outcome {
	s := r.s
	self := frame.Ref{Kind: sourcev1.HelmChartKind, Namespace: obj.Namespace, Name: obj.Name}
	if err := HelmChartUnsupported(obj); err != nil {
		return frame.Stalled(frame.UnsupportedFieldReason, err)
	}
	sr := obj.Spec.SourceRef
	if !slices.Contains(chartSourceKinds, sr.Kind) {
		return frame.Stalled(meta.ArtifactFailedReason, fmt.Errorf("%s: spec.sourceRef.kind %q is not HelmRepository, GitRepository or Bucket", self, sr.Kind))
	}
	src := frame.Ref{Kind: sr.Kind, Namespace: obj.Namespace, Name: sr.Name}
	edges := &chartEdges{g: s.deps.Graph, self: self}
	edges.add(src)
	// A verification is made again at every reconcile, as source-controller
	// makes it: a failed one is not kept.
	if obj.Spec.Verify == nil || conditions.IsFalse(obj, sourcev1.SourceVerifiedCondition) {
		conditions.Delete(obj, sourcev1.SourceVerifiedCondition)
	}
	b, out, ok := r.build(ctx, obj, self, "", edges)
	if b.verified {
		conditions.MarkTrue(obj, sourcev1.SourceVerifiedCondition, meta.SucceededReason, "verified signature of version %s", b.version)
	}
	if !ok {
		// The chart keeps waiting on the repositories of its dependencies
		// too: the one that gets its artifact wakes it.
		return out
	}
	// Built: only the source wakes it again, as in Flux.
	s.deps.Graph.Set(self, []frame.Ref{src})
	verb, reason := "pulled", sourcev1.ChartPullSucceededReason
	if b.packaged || (b.unchanged && (sr.Kind != sourcev1.HelmRepositoryKind || len(obj.Status.ObservedValuesFiles) > 0)) {
		verb, reason = "packaged", sourcev1.ChartPackageSucceededReason
	}
	obj.Status.ObservedSourceArtifactRevision = b.sourceRevision
	if b.unchanged {
		o := frame.Succeeded("%s '%s' chart with version '%s'", verb, obj.Status.ObservedChartName, obj.Status.Artifact.Revision)
		o.Reason = reason
		return o
	}
	art, err := s.deps.Store.Put(ctx, sobj, b.version, bytes.NewReader(b.data))
	if err != nil {
		return frame.Failed(meta.ArtifactFailedReason, fmt.Errorf("%s: %w", self, err))
	}
	obj.Status.Artifact = frame.MetaArtifact(art)
	obj.Status.URL = art.URL
	obj.Status.ObservedChartName = b.name
	obj.Status.ObservedValuesFiles = b.valuesFiles
	if _, err := s.deps.Store.GC(ctx, sobj, art); err != nil {
		return frame.Failed(meta.ArtifactFailedReason, fmt.Errorf("garbage-collecting old artifacts: %w", err))
	}
	o := frame.Succeeded("%s '%s' chart with version '%s'", verb, b.name, b.version)
	o.Reason = reason
	return o
}

// build produces the chart archive of obj. pin, when set, is the exact
// version to build (a rebuild of the version status names); otherwise
// the spec selects it, and an unchanged chart is not built again. edges,
// when set, records what the build waits on.
func (r *helmChartReconciler) build(ctx context.Context, obj *sourcev1.HelmChart, self frame.Ref, pin string, edges *chartEdges) (builtChart, frame.Outcome, bool) {
	if obj.Spec.SourceRef.Kind == sourcev1.HelmRepositoryKind {
		return r.fromRepository(ctx, obj, self, pin)
	}
	return r.fromSource(ctx, obj, self, pin, edges)
}

// chartEdges records in the dependency graph what a HelmChart waits on,
// as its build meets it: its source, and for each dependency of a
// packaged chart the HelmRepository it comes from, or its URL while no
// HelmRepository has it. Each edge is recorded before the state it guards
// is read, so a repository that gets its artifact in between still wakes
// the chart: without them, a chart built before the repository of a
// dependency had an artifact waited for its own interval.
type chartEdges struct {
	g    *frame.Graph
	self frame.Ref
	refs []frame.Ref
}

func (c *chartEdges) add(ref frame.Ref) {
	if c == nil || slices.Contains(c.refs, ref) {
		return
	}
	c.refs = append(c.refs, ref)
	c.g.Set(c.self, c.refs)
}

// repositoryURLRef names, in the dependency graph, the HelmRepository of
// namespace that has url, while none has: a chart dependency waits on it,
// and a HelmRepository with that URL wakes it (helmRepositoryReconciler).
// No object name holds a ':', so it is no real HelmRepository's name.
func repositoryURLRef(namespace, url string) frame.Ref {
	return frame.Ref{Kind: sourcev1.HelmRepositoryKind, Namespace: namespace, Name: "url:" + strings.TrimSuffix(url, "/")}
}

// unchanged reports whether the stored artifact already is version of
// the chart the spec names.
func (r *helmChartReconciler) unchanged(obj *sourcev1.HelmChart, version string) bool {
	a := obj.Status.Artifact
	return a != nil && a.Revision == version && r.s.deps.Stored(frame.StoreArtifact(a)) && sameValuesFiles(obj) &&
		(obj.Spec.SourceRef.Kind != sourcev1.HelmRepositoryKind || obj.Status.ObservedChartName == obj.Spec.Chart)
}

// sameValuesFiles reports whether the artifact was built with the values
// files the spec names: all of them, or with ignoreMissingValuesFiles
// those of them that existed.
func sameValuesFiles(obj *sourcev1.HelmChart) bool {
	have, want := obj.Status.ObservedValuesFiles, obj.Spec.ValuesFiles
	if !obj.Spec.IgnoreMissingValuesFiles {
		return slices.Equal(have, want)
	}
	i := 0
	for _, f := range want {
		if i < len(have) && have[i] == f {
			i++
		}
	}
	return i == len(have)
}

// helmRepository reads the HelmRepository a chart names, from the cache
// and, when the cache has not seen it yet, from the API server.
func (s *Sources) helmRepository(ctx context.Context, self frame.Ref, namespace, name string) (*sourcev1.HelmRepository, frame.Outcome, bool) {
	repo := &sourcev1.HelmRepository{}
	key := client.ObjectKey{Namespace: namespace, Name: name}
	err := s.deps.Client.Get(ctx, key, repo)
	if apierrors.IsNotFound(err) {
		err = s.deps.APIReader.Get(ctx, key, repo)
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, frame.Failed(meta.ArtifactFailedReason, fmt.Errorf("%s: source HelmRepository/%s/%s not found", self, namespace, name)), false
		}
		return nil, frame.Failed(meta.ArtifactFailedReason, fmt.Errorf("%s: reading HelmRepository/%s/%s: %w", self, namespace, name, err)), false
	}
	return repo, frame.Outcome{}, true
}

func (r *helmChartReconciler) fromRepository(ctx context.Context, obj *sourcev1.HelmChart, self frame.Ref, pin string) (builtChart, frame.Outcome, bool) {
	s := r.s
	repo, out, ok := s.helmRepository(ctx, self, obj.Namespace, obj.Spec.SourceRef.Name)
	if !ok {
		return builtChart{}, out, false
	}
	if repo.Spec.Type == sourcev1.HelmRepositoryTypeOCI {
		return r.fromOCI(ctx, obj, self, repo, pin)
	}
	if obj.Spec.Verify != nil {
		return builtChart{}, frame.Stalled(frame.UnsupportedFieldReason, fmt.Errorf("%s: spec.verify: only charts from an OCI HelmRepository have signatures to verify; HelmRepository/%s/%s is of type default (source-controller ignores verify there; cozy-aio never ignores it)",
			self, repo.Namespace, repo.Name)), false
	}
	repoRef := fmt.Sprintf("HelmRepository/%s/%s", repo.Namespace, repo.Name)
	opts, err := s.helmRepoOptions(ctx, repo)
	if err != nil {
		return builtChart{}, frame.Failed(sourcev1.AuthenticationFailedReason, fmt.Errorf("%s: %w", self, err)), false
	}
	idx, idxRev, out, ok := r.index(ctx, self, repo, opts, pin != "")
	if !ok {
		return builtChart{}, out, false
	}
	want := obj.Spec.Version
	if pin != "" {
		want = pin
	}
	cv, err := helmrepo.Select(idx, obj.Spec.Chart, want)
	if err != nil {
		return builtChart{}, frame.Failed(chartPullErrorReason, fmt.Errorf("%s: %s: %w", self, repoRef, err)), false
	}
	b := builtChart{name: obj.Spec.Chart, version: cv.Version, sourceRevision: idxRev}
	if pin == "" && r.unchanged(obj, cv.Version) {
		b.unchanged = true
		return b, frame.Outcome{}, true
	}
	b.data, err = s.deps.HelmRepos.DownloadChart(ctx, repo.Spec.URL, cv, opts)
	if err != nil {
		return builtChart{}, frame.Failed(chartPullErrorReason, fmt.Errorf("%s: chart %s %s from %s: %w", self, obj.Spec.Chart, cv.Version, repoRef, err)), false
	}
	return withValuesFiles(obj, self, b)
}

// withValuesFiles packages a pulled chart again with spec.valuesFiles as
// its default values, as Flux does.
func withValuesFiles(obj *sourcev1.HelmChart, self frame.Ref, b builtChart) (builtChart, frame.Outcome, bool) {
	if len(obj.Spec.ValuesFiles) == 0 {
		return b, frame.Outcome{}, true
	}
	p, err := helmrepo.Repack(b.data, helmrepo.ValuesOptions{Files: obj.Spec.ValuesFiles, IgnoreMissing: obj.Spec.IgnoreMissingValuesFiles})
	if err != nil {
		return builtChart{}, frame.Failed(chartPackageErrorReason, fmt.Errorf("%s: chart %s %s: %w", self, b.name, b.version, err)), false
	}
	if len(p.ValuesFiles) == 0 {
		// Every file was missing and ignored: the chart as pulled.
		return b, frame.Outcome{}, true
	}
	b.data, b.valuesFiles, b.packaged = p.Data, p.ValuesFiles, true
	return b, frame.Outcome{}, true
}

// index returns the parsed index of an HTTP repository and its revision.
// The leader reads the HelmRepository's artifact; a rebuild on a replica
// that lacks it (fresh) fetches the index into a scratch store.
func (r *helmChartReconciler) index(ctx context.Context, self frame.Ref, repo *sourcev1.HelmRepository, opts helmrepo.Options, fresh bool) (*helmindex.IndexFile, string, frame.Outcome, bool) {
	s := r.s
	repoRef := frame.Ref{Kind: sourcev1.HelmRepositoryKind, Namespace: repo.Namespace, Name: repo.Name}
	a := repo.Status.Artifact
	if a != nil && s.storedIndex(frame.StoreArtifact(a)) {
		idx, err := s.deps.HelmRepos.Index(s.deps.Store, frame.StoreArtifact(a))
		if err == nil {
			return idx, a.Revision, frame.Outcome{}, true
		}
	}
	if !fresh {
		if a == nil {
			return nil, "", frame.Waiting(meta.ArtifactFailedReason, fmt.Sprintf("source %s has no artifact yet", repoRef), 0), false
		}
		// The store lost the index (a wiped data directory): the
		// repository fetches it again and wakes this chart.
		s.deps.Enqueue(repoRef)
		return nil, "", frame.Waiting(meta.ArtifactFailedReason, fmt.Sprintf("source %s: index %s is being fetched again", repoRef, a.Revision), frame.MaterializeRetry), false
	}
	tmp, err := os.MkdirTemp("", "cozy-helmindex-")
	if err != nil {
		return nil, "", frame.Failed(meta.ArtifactFailedReason, err), false
	}
	defer os.RemoveAll(tmp)
	scratch, err := source.NewStore(tmp, source.StoreOptions{})
	if err != nil {
		return nil, "", frame.Failed(meta.ArtifactFailedReason, err), false
	}
	sobj := source.Object{Kind: repoRef.Kind, Namespace: repoRef.Namespace, Name: repoRef.Name}
	res, err := s.deps.HelmRepos.FetchIndex(ctx, scratch, sobj, repo.Spec.URL, "", opts)
	if err != nil {
		return nil, "", frame.Failed(sourcev1.IndexationFailedReason, fmt.Errorf("%s: %w", self, err)), false
	}
	idx, err := s.deps.HelmRepos.Index(scratch, res.Artifact)
	if err != nil {
		return nil, "", frame.Failed(sourcev1.IndexationFailedReason, fmt.Errorf("%s: %w", self, err)), false
	}
	return idx, res.Digest, frame.Outcome{}, true
}

// fromOCI pulls the chart <url>/<chart> of an OCI HelmRepository: an
// exact version is a tag, anything else a semver range over the tags.
func (r *helmChartReconciler) fromOCI(ctx context.Context, obj *sourcev1.HelmChart, self frame.Ref, repo *sourcev1.HelmRepository, pin string) (builtChart, frame.Outcome, bool) {
	s := r.s
	reg, err := s.helmRepoRegistry(ctx, repo)
	if err != nil {
		return builtChart{}, frame.Failed(sourcev1.AuthenticationFailedReason, fmt.Errorf("%s: %w", self, err)), false
	}
	chartURL := strings.TrimSuffix(repo.Spec.URL, "/") + "/" + obj.Spec.Chart
	want := obj.Spec.Version
	if pin != "" {
		want = pin
	}
	ref := oci.Ref{SemVer: want}
	if want == "" {
		ref.SemVer = "*"
	} else if _, err := semver.StrictNewVersion(want); err == nil {
		ref = oci.Ref{Tag: strings.ReplaceAll(want, "+", "_")}
	}
	maxSize := s.opts.HelmChartMaxSize
	if maxSize <= 0 {
		maxSize = helmrepo.DefaultMaxChartSize
	}
	opts := oci.Options{Registry: reg, Ref: ref, Timeout: frame.DurationOr(repo.Spec.Timeout, 60*time.Second), MaxSize: maxSize}
	rev, err := oci.Resolve(ctx, chartURL, opts)
	if err != nil {
		return builtChart{}, frame.Failed(chartPullErrorReason, fmt.Errorf("%s: %w", self, err)), false
	}
	version := strings.ReplaceAll(rev.Tag, "_", "+")
	b := builtChart{name: obj.Spec.Chart, version: version}
	if v := obj.Spec.Verify; v != nil {
		var out frame.Outcome
		var ok bool
		if b.verified, out, ok = s.verifyChart(ctx, obj, self, v, chartURL, rev.Digest, reg); !ok {
			return builtChart{}, out, false
		}
	}
	if pin == "" && r.unchanged(obj, version) {
		b.unchanged = true
		return b, frame.Outcome{}, true
	}
	key := fmt.Sprintf("oci\x00%s\x00%s\x00%s\x00%x", chartURL, rev.Tag, rev.Digest, sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%s", reg.DockerConfigJSON, reg.Username, reg.Password)))
	b.data, err = s.deps.HelmRepos.Shared(ctx, key, func(ctx context.Context) ([]byte, error) {
		opts.Layer = oci.LayerSelector{MediaType: helmChartLayerMediaType}
		data, _, err := oci.ReadRevision(ctx, chartURL, rev.String, opts)
		if errors.Is(err, oci.ErrLayerNotFound) {
			opts.Layer.MediaType = legacyHelmChartLayerMediaType
			data, _, err = oci.ReadRevision(ctx, chartURL, rev.String, opts)
		}
		if err == nil {
			_, err = helmrepo.VerifyChart(data, obj.Spec.Chart, version)
		}
		return data, err
	})
	if err != nil {
		return builtChart{}, frame.Failed(chartPullErrorReason, fmt.Errorf("%s: chart %s:%s: %w", self, chartURL, rev.Tag, err)), false
	}
	return withValuesFiles(obj, self, b)
}

// fromSource packages the chart at spec.chart (a path) of a GitRepository
// or Bucket artifact.
func (r *helmChartReconciler) fromSource(ctx context.Context, obj *sourcev1.HelmChart, self frame.Ref, pin string, edges *chartEdges) (builtChart, frame.Outcome, bool) {
	s := r.s
	sr := obj.Spec.SourceRef
	if obj.Spec.Verify != nil {
		return builtChart{}, frame.Stalled(frame.UnsupportedFieldReason, fmt.Errorf("%s: spec.verify: only charts from an OCI HelmRepository have signatures to verify, not a chart of a %s (source-controller ignores verify there; cozy-aio never ignores it)",
			self, sr.Kind)), false
	}
	art, out, ok := s.deps.SourceArtifact(ctx, self, sr.Kind, obj.Namespace, sr.Name)
	if !ok {
		return builtChart{}, out, false
	}
	b := builtChart{packaged: true, sourceRevision: art.Revision}
	if pin == "" && obj.Status.ObservedSourceArtifactRevision == art.Revision && obj.Status.Artifact != nil &&
		r.unchanged(obj, obj.Status.Artifact.Revision) {
		b.unchanged = true
		return b, frame.Outcome{}, true
	}
	tmp, err := os.MkdirTemp("", "cozy-helmchart-")
	if err != nil {
		return builtChart{}, frame.Failed(meta.ArtifactFailedReason, err), false
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "src")
	if err := s.deps.Store.Extract(ctx, art, src, source.ExtractOptions{}); err != nil {
		return builtChart{}, frame.Failed(meta.ArtifactFailedReason, fmt.Errorf("%s: extracting %s/%s/%s: %w", self, sr.Kind, obj.Namespace, sr.Name, err)), false
	}
	rel := path.Clean("/" + obj.Spec.Chart)
	chartDir := filepath.Join(src, filepath.FromSlash(rel))
	p, err := helmrepo.Package(chartDir, helmrepo.PackageOptions{
		VersionMetadata: versionMetadata(obj, art.Revision),
		Values:          helmrepo.ValuesOptions{Files: obj.Spec.ValuesFiles, IgnoreMissing: obj.Spec.IgnoreMissingValuesFiles},
		ValuesRoot:      src,
		Dependencies:    r.dependencies(ctx, obj, self, src, chartDir, edges),
	})
	if err != nil {
		return builtChart{}, frame.Failed(chartPackageErrorReason, fmt.Errorf("%s: chart at %s of %s/%s/%s: %w", self, rel, sr.Kind, obj.Namespace, sr.Name, err)), false
	}
	b.name, b.version, b.data, b.valuesFiles = p.Metadata.Name, p.Metadata.Version, p.Data, p.ValuesFiles
	if pin != "" && b.version != pin {
		return builtChart{}, frame.Failed(chartPackageErrorReason, fmt.Errorf("%s: chart at %s has version %s now, not %s", self, rel, b.version, pin)), false
	}
	if pin == "" && obj.Spec.ReconcileStrategy != sourcev1.ReconcileStrategyRevision && r.unchanged(obj, b.version) &&
		obj.Status.ObservedChartName == b.name {
		// ChartVersion: a new artifact only for a new version, as in Flux.
		b.unchanged = true
	}
	return b, frame.Outcome{}, true
}

// versionMetadata is the build metadata Flux appends to the chart version
// with the Revision strategy: the first 12 hex characters of the source
// revision's commit or digest.
func versionMetadata(obj *sourcev1.HelmChart, revision string) string {
	if obj.Spec.ReconcileStrategy != sourcev1.ReconcileStrategyRevision {
		return ""
	}
	rev := revision
	if i := strings.LastIndex(rev, ":"); i >= 0 {
		rev = rev[i+1:]
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	return rev
}

// rebuildHelmChart builds exactly the chart version of revision again, as
// the HelmChart reconciler built it, into staging.
func (s *Sources) rebuildHelmChart(ctx context.Context, staging *source.Store, sobj source.Object, obj *sourcev1.HelmChart, revision string) (source.Artifact, error) {
	release, err := s.deps.Slot(ctx)
	if err != nil {
		return source.Artifact{}, err
	}
	defer release()
	self := frame.Ref{Kind: sourcev1.HelmChartKind, Namespace: obj.Namespace, Name: obj.Name}
	b, out, ok := (&helmChartReconciler{s: s}).build(ctx, obj, self, revision, nil)
	if !ok {
		return source.Artifact{}, errors.New(out.Message)
	}
	return staging.Put(ctx, sobj, b.version, bytes.NewReader(b.data))
}

// dependencies resolves the dependencies a packaged chart does not vendor:
// file:// paths inside the source, and charts of repositories that a
// HelmRepository of the chart's namespace names (its credentials apply).
// Other repositories are refused rather than fetched anonymously. edges,
// when set, records the repositories (or URLs) the chart waits on.
func (r *helmChartReconciler) dependencies(ctx context.Context, obj *sourcev1.HelmChart, self frame.Ref, root, chartDir string, edges *chartEdges) helmrepo.DependencyResolver {
	return func(dep *chartv2.Dependency) ([]byte, error) {
		if rest, ok := strings.CutPrefix(dep.Repository, "file://"); ok {
			dir := filepath.Join(chartDir, filepath.FromSlash(rest))
			if rel, err := filepath.Rel(root, dir); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				return nil, fmt.Errorf("%s is outside the source", dep.Repository)
			}
			p, err := helmrepo.Package(dir, helmrepo.PackageOptions{})
			return p.Data, err
		}
		edges.add(repositoryURLRef(obj.Namespace, dep.Repository))
		var repos sourcev1.HelmRepositoryList
		if err := r.s.deps.Client.List(ctx, &repos, client.InNamespace(obj.Namespace)); err != nil {
			return nil, err
		}
		for i := range repos.Items {
			hr := &repos.Items[i]
			if strings.TrimSuffix(hr.Spec.URL, "/") != strings.TrimSuffix(dep.Repository, "/") {
				continue
			}
			edges.add(frame.Ref{Kind: sourcev1.HelmRepositoryKind, Namespace: hr.Namespace, Name: hr.Name})
			sub := &sourcev1.HelmChart{ObjectMeta: obj.ObjectMeta, Spec: sourcev1.HelmChartSpec{
				Chart: dep.Name, Version: dep.Version,
				SourceRef: sourcev1.LocalHelmChartSourceReference{Kind: sourcev1.HelmRepositoryKind, Name: hr.Name},
			}}
			b, out, ok := r.fromRepository(ctx, sub, self, "")
			if !ok {
				return nil, errors.New(out.Message)
			}
			return b.data, nil
		}
		return nil, fmt.Errorf("no HelmRepository in namespace %s has the URL %s", obj.Namespace, dep.Repository)
	}
}
