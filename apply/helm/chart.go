package helm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"

	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/oci"
)

// Media types of a Helm chart in an OCI registry.
const (
	chartLayerMediaType       = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
	legacyChartLayerMediaType = "application/tar+gzip"
)

// maxChartSize bounds a chart archive read from a file or a registry.
const maxChartSize = 64 << 20

// Chart says where a chart comes from: a .tgz file or an OCI reference.
type Chart struct {
	// Path is a chart archive (.tgz) on local disk, such as an artifact of
	// the source store. Path wins over Ref.
	Path string
	// Ref is an OCI chart reference, "oci://host/repo/name" with an
	// optional ":tag" or "@digest".
	Ref string
	// Version is the tag to pull when Ref has none. A SemVer "+" is
	// written as "_" as Helm does. Default: the tag in Ref, else required.
	Version string
	// Registry is how Ref is pulled: credentials, plain HTTP, TLS and
	// proxy, as for an OCIRepository. Default: anonymous HTTPS.
	Registry oci.Registry
	// Revision, when set, is the revision of the chart's source artifact,
	// whose digest goes into the version the chart is installed as, as
	// helm-controller does for an OCIRepository and an ExternalArtifact
	// with a ":" in its revision (ChartVersionWithDigest): the release
	// record and the rendered .Chart.Version say that version. A revision
	// that does not fit the chart's version fails the action with a
	// *ChartVersionError. Default: "", the chart's own version.
	Revision string
}

func (c Chart) String() string {
	if c.Path != "" {
		return c.Path
	}
	if c.Version != "" && !strings.Contains(strings.TrimPrefix(c.Ref, "oci://"), ":") {
		return c.Ref + ":" + c.Version
	}
	return c.Ref
}

// boundedCache keeps up to max values by key, dropping the oldest first.
// The Manager keeps two: chart archives pulled from registries by manifest
// digest, so that many releases of one chart pull it once, and loaded
// charts by archive digest, so that they unpack and parse it once (each
// action gets its own copy: Helm's dependency processing writes to the
// chart).
type boundedCache[V any] struct {
	mu    sync.Mutex
	max   int
	order []string
	data  map[string]V
}

func (c *boundedCache[V]) get(k string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.data[k]
	return v, ok
}

func (c *boundedCache[V]) put(k string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.data == nil {
		c.data = map[string]V{}
	}
	if _, ok := c.data[k]; ok {
		return
	}
	if len(c.order) >= c.max {
		delete(c.data, c.order[0])
		c.order = c.order[1:]
	}
	c.order = append(c.order, k)
	c.data[k] = v
}

// loadChart reads the chart and returns it with the digest of its archive
// (the OCI manifest digest for a registry chart).
func (m *Manager) loadChart(ctx context.Context, c Chart) (*chartv2.Chart, string, error) {
	var (
		data   []byte
		digest string
		err    error
	)
	switch {
	case c.Path != "":
		data, err = readFile(c.Path)
		digest = source.SHA256Hex(data)
	case c.Ref != "":
		data, digest, err = m.pullChart(ctx, c)
	default:
		return nil, "", errors.New("no chart: set Chart.Path or Chart.Ref")
	}
	if err != nil {
		return nil, "", err
	}
	if ch, ok := m.parsed.get(digest); ok {
		return copyChart(ch), digest, nil
	}
	ch, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return nil, "", fmt.Errorf("loading chart %s: %w", c, err)
	}
	m.parsed.put(digest, ch)
	return copyChart(ch), digest, nil
}

// copyChart copies what Helm may write while it runs an action on a chart:
// each chart struct and its dependency tree, the metadata with its
// dependencies and maintainers, the lock, and the default values. File
// contents, which nothing writes, stay shared.
func copyChart(c *chartv2.Chart) *chartv2.Chart {
	n := *c
	if c.Metadata != nil {
		md := *c.Metadata
		md.Dependencies = copyDependencies(c.Metadata.Dependencies)
		if c.Metadata.Maintainers != nil {
			md.Maintainers = make([]*chartv2.Maintainer, len(c.Metadata.Maintainers))
			for i, mt := range c.Metadata.Maintainers {
				cp := *mt
				md.Maintainers[i] = &cp
			}
		}
		n.Metadata = &md
	}
	if c.Lock != nil {
		l := *c.Lock
		l.Dependencies = copyDependencies(c.Lock.Dependencies)
		n.Lock = &l
	}
	if c.Values != nil {
		n.Values = copyValue(c.Values).(map[string]any)
	}
	n.Raw = slices.Clone(c.Raw)
	n.Templates = slices.Clone(c.Templates)
	n.Files = slices.Clone(c.Files)
	deps := make([]*chartv2.Chart, 0, len(c.Dependencies()))
	for _, d := range c.Dependencies() {
		deps = append(deps, copyChart(d))
	}
	n.SetDependencies(deps...)
	return &n
}

func copyDependencies(ds []*chartv2.Dependency) []*chartv2.Dependency {
	if ds == nil {
		return nil
	}
	out := make([]*chartv2.Dependency, len(ds))
	for i, d := range ds {
		cp := *d
		cp.Tags = slices.Clone(d.Tags)
		if d.ImportValues != nil {
			cp.ImportValues = copyValue(d.ImportValues).([]any)
		}
		out[i] = &cp
	}
	return out
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrChartNotFound, path)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxChartSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxChartSize {
		return nil, fmt.Errorf("chart %s is larger than %d bytes", path, maxChartSize)
	}
	return b, nil
}

// pullChart pulls a registry chart through source/oci. The manifest digest
// is resolved on every call; the chart layer is pulled only when no chart
// of that digest is cached.
func (m *Manager) pullChart(ctx context.Context, c Chart) ([]byte, string, error) {
	ref := strings.TrimPrefix(c.Ref, "oci://")
	if ref == c.Ref {
		return nil, "", fmt.Errorf("chart reference %q is not oci://", c.Ref)
	}
	repoURL, tag := splitRef(ref)
	if tag == "" {
		tag = strings.ReplaceAll(c.Version, "+", "_")
	}
	if tag == "" {
		return nil, "", fmt.Errorf("chart reference %s has no tag or digest and Chart.Version is empty", c.Ref)
	}
	opts := oci.Options{
		Registry: c.Registry,
		Ref:      oci.Ref{Tag: tag},
		Layer:    oci.LayerSelector{MediaType: chartLayerMediaType},
		MaxSize:  maxChartSize,
	}
	if strings.Contains(tag, ":") { // a tag has no ":", a digest is algorithm:hex
		opts.Ref = oci.Ref{Digest: tag}
	}
	rev, err := oci.Resolve(ctx, repoURL, opts)
	if errors.Is(err, source.ErrRefNotFound) {
		return nil, "", fmt.Errorf("%w: %s: %w", ErrChartNotFound, c, err)
	}
	if err != nil {
		return nil, "", fmt.Errorf("resolving %s: %w", c, err)
	}
	if b, ok := m.charts.get(rev.Digest); ok {
		return b, rev.Digest, nil
	}
	b, _, err := oci.ReadRevision(ctx, repoURL, rev.String, opts)
	if errors.Is(err, oci.ErrLayerNotFound) {
		opts.Layer.MediaType = legacyChartLayerMediaType
		b, _, err = oci.ReadRevision(ctx, repoURL, rev.String, opts)
	}
	switch {
	case errors.Is(err, oci.ErrLayerNotFound):
		return nil, "", fmt.Errorf("%s is not a Helm chart: no layer of type %s", c, chartLayerMediaType)
	case errors.Is(err, source.ErrTooLarge):
		return nil, "", fmt.Errorf("chart %s is larger than %d bytes: %w", c, maxChartSize, err)
	case err != nil:
		return nil, "", fmt.Errorf("pulling %s: %w", c, err)
	}
	m.charts.put(rev.Digest, b)
	return b, rev.Digest, nil
}

// splitRef splits host/repo:tag or host/repo@digest into repository and
// tag or digest.
func splitRef(ref string) (repo, tag string) {
	if i := strings.Index(ref, "@"); i >= 0 {
		return ref[:i], ref[i+1:]
	}
	slash := strings.LastIndex(ref, "/")
	if i := strings.LastIndex(ref, ":"); i > slash {
		return ref[:i], ref[i+1:]
	}
	return ref, ""
}
