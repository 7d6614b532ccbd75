package helm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/fluxcd/pkg/chartutil"
	"github.com/opencontainers/go-digest"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// SnapshotAPIVersion is the APIVersion of the snapshots SnapshotOf makes.
// helm-controller verifies the Digest of a snapshot with this version
// against the release record and skips the check for older ones.
const SnapshotAPIVersion = "v2"

// Snapshot is one release record as helm-controller lists it in a
// HelmRelease's status.history, without the Flux API types: the engine
// converts it. Two writers that agree on it can take a release over from
// each other without an upgrade.
type Snapshot struct {
	// APIVersion is SnapshotAPIVersion; "" in snapshots written before
	// helm-controller recorded digests.
	APIVersion string
	// Digest is RecordDigest of the record, with OCIDigest.
	Digest string
	// Name and Namespace are the release's (the Helm release name, which
	// the engine shortens as helm-controller does).
	Name, Namespace string
	// Version is the record's revision.
	Version int
	// Status is Helm's status of the record: "deployed", "superseded",
	// "failed", "uninstalled", "pending-install"…
	Status string
	// Action is what wrote the record: "install", "upgrade", "rollback",
	// "uninstall" or "uninstall-remediation"; "" when the snapshot was
	// refreshed from a record this reconcile did not make (the revision an
	// upgrade superseded).
	Action string
	// ChartName, ChartVersion and AppVersion are the record's chart
	// metadata; ChartVersion is the version Helm installed, with the
	// digest metadata of ChartVersionWithDigest when it was added.
	ChartName, ChartVersion, AppVersion string
	// ConfigDigest is ConfigDigest of the record's values.
	ConfigDigest string
	// FirstDeployed, LastDeployed and Deleted are the record's times; zero
	// when Helm did not set them. The status keeps whole seconds.
	FirstDeployed, LastDeployed, Deleted time.Time
	// TestHooks are the last runs of the record's test hooks by name,
	// once they ran; nil means not tested.
	TestHooks map[string]HookRun
	// OCIDigest is the digest of the chart's source artifact (see
	// ChartVersionWithDigest); "" for a chart from a HelmChart.
	OCIDigest string
}

// SnapshotOf is the snapshot helm-controller records for a release record
// that action wrote, with the source's OCI digest: not yet tested.
func SnapshotOf(r *releasev1.Release, action, ociDigest string) Snapshot {
	s := Snapshot{
		APIVersion: SnapshotAPIVersion,
		Digest:     RecordDigest(r, ociDigest),
		Action:     action,
		OCIDigest:  ociDigest,
	}
	if r == nil {
		s.ConfigDigest = ConfigDigest(nil)
		return s
	}
	s.Name, s.Namespace, s.Version = r.Name, r.Namespace, r.Version
	s.ConfigDigest = ConfigDigest(r.Config)
	if r.Info != nil {
		s.Status = r.Info.Status.String()
		s.FirstDeployed, s.LastDeployed, s.Deleted = r.Info.FirstDeployed, r.Info.LastDeployed, r.Info.Deleted
	}
	if r.Chart != nil && r.Chart.Metadata != nil {
		m := r.Chart.Metadata
		s.ChartName, s.ChartVersion, s.AppVersion = m.Name, m.Version, m.AppVersion
	}
	return s
}

// ConfigDigest is helm-controller's digest of release values
// (status.lastAttemptedConfigDigest and a snapshot's configDigest):
// SHA-256 of the values as YAML with sorted keys, "sha256:<hex>". Nil and
// empty values have the digest of nothing.
func ConfigDigest(values map[string]any) string {
	return chartutil.DigestValues(digest.SHA256, values).String()
}

// RecordDigest is the digest helm-controller records for a release record
// (a snapshot's digest) and checks before it trusts a record as its own:
// SHA-256 of the JSON of the record's name, version, info, chart metadata,
// values, manifest, hooks other than test hooks, namespace and, when not
// "", the source's OCI digest, in that order, as encoding/json's Encoder
// writes it (HTML characters escaped, a trailing newline); "sha256:<hex>".
//
// The info has the fields of Helm 4.2, which helm-controller v1.6 builds
// on: Helm 4.3's rollback_revision is left out, or no record of a Helm 4.3
// rollback would verify in helm-controller. Test hooks are left out so that
// a test run does not change the digest. The digest does not depend on the
// record's storage (its labels, the chart's templates and files). It is ""
// when the record cannot be encoded.
func RecordDigest(r *releasev1.Release, ociDigest string) string {
	h := sha256.New()
	if err := json.NewEncoder(h).Encode(observe(r, ociDigest)); err != nil {
		return ""
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// recordObservation is what RecordDigest hashes; its field order is the
// key order of the JSON.
type recordObservation struct {
	Name          string           `json:"name"`
	Version       int              `json:"version"`
	Info          recordInfo       `json:"info"`
	ChartMetadata chartv2.Metadata `json:"chartMetadata"`
	// Config is null for nil and empty values alike.
	Config   map[string]any `json:"config"`
	Manifest string         `json:"manifest"`
	// Hooks is null when the record has no hook other than test hooks.
	Hooks     []releasev1.Hook `json:"hooks"`
	Namespace string           `json:"namespace"`
	OCIDigest string           `json:"ociDigest,omitempty"`
}

// recordInfo is Helm 4.2's JSON form of release info: zero times left out.
type recordInfo struct {
	FirstDeployed *time.Time                  `json:"first_deployed,omitempty"`
	LastDeployed  *time.Time                  `json:"last_deployed,omitempty"`
	Deleted       *time.Time                  `json:"deleted,omitempty"`
	Description   string                      `json:"description,omitempty"`
	Status        string                      `json:"status,omitempty"`
	Notes         string                      `json:"notes,omitempty"`
	Resources     map[string][]runtime.Object `json:"resources,omitempty"`
}

func observe(r *releasev1.Release, ociDigest string) recordObservation {
	o := recordObservation{OCIDigest: ociDigest}
	if r == nil {
		return o
	}
	o.Name, o.Version, o.Manifest, o.Namespace = r.Name, r.Version, r.Manifest, r.Namespace
	if r.Info != nil {
		o.Info = infoOf(r.Info)
	}
	if r.Chart != nil && r.Chart.Metadata != nil {
		o.ChartMetadata = *r.Chart.Metadata
	}
	if len(r.Config) > 0 {
		o.Config = r.Config
	}
	for _, h := range r.Hooks {
		if h != nil && !isTestHook(h) {
			o.Hooks = append(o.Hooks, *h)
		}
	}
	return o
}

func infoOf(i *releasev1.Info) recordInfo {
	out := recordInfo{
		Description: i.Description,
		Status:      i.Status.String(),
		Notes:       i.Notes,
		Resources:   i.Resources,
	}
	timeOrNil := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		return &t
	}
	out.FirstDeployed, out.LastDeployed, out.Deleted = timeOrNil(i.FirstDeployed), timeOrNil(i.LastDeployed), timeOrNil(i.Deleted)
	return out
}

// TestHooksOf is a snapshot's TestHooks after the record's tests ran: the
// last run of each of its test hooks by name, empty (not nil) when it has
// none.
func TestHooksOf(r *releasev1.Release) map[string]HookRun {
	out := map[string]HookRun{}
	if r != nil {
		for name, run := range testsOf(r) {
			out[name] = run
		}
	}
	return out
}
