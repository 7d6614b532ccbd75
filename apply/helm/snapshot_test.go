package helm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/chartutil"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// The vectors below were computed with helm-controller v1.6.2 itself.
const (
	goldenObservation = "{\"name\":\"podinfo\",\"version\":2,\"info\":{\"first_deployed\":\"2025-01-02T03:04:05.123456789Z\",\"last_deployed\":\"2025-01-02T03:05:05.123456789Z\",\"description\":\"Upgrade complete\",\"status\":\"deployed\"},\"chartMetadata\":{\"name\":\"podinfo\",\"version\":\"6.5.0+0123456789ab\",\"apiVersion\":\"v2\",\"appVersion\":\"6.5.0\"},\"config\":{\"b\":{\"a\":[1,\"two\"],\"z\":\"\\u003cx\\u003e\"},\"replicaCount\":2},\"manifest\":\"---\\n# Source: x\\napiVersion: v1\\nkind: ConfigMap\\n\",\"hooks\":[{\"name\":\"pre\",\"kind\":\"Job\",\"events\":[\"pre-upgrade\"],\"last_run\":{\"started_at\":\"2025-01-02T03:04:05.123456789Z\",\"phase\":\"Succeeded\"}}],\"namespace\":\"apps\"}\n"
	goldenDigest      = "sha256:7d99c376dcf58abe98cff179b1e434f036be444ddc46a31a331cf4b6a97a0649"
	goldenOCIDigest   = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	goldenDigestOCI   = "sha256:8f194325dd64ec7ea07aa1fbf29b34c4e21195eb66e14a11b61c10755779d067"
	goldenConfigYAML  = "b:\n  a:\n  - 1\n  - two\n  z: <x>\nreplicaCount: 2\n"
	goldenConfig      = "sha256:143ac9f6afb48b2b07e9beff62390507c389f51c809ab89c62349280cb16c40c"
	emptyConfig       = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
)

var goldenFirstDeployed = time.Date(2025, 1, 2, 3, 4, 5, 123456789, time.UTC)

// goldenValues are the vector's values as they come out of JSON: numbers
// are float64.
func goldenValues() map[string]any {
	return map[string]any{
		"replicaCount": float64(2),
		"b":            map[string]any{"z": "<x>", "a": []any{float64(1), "two"}},
	}
}

// goldenRelease is the record of the vectors: its test hook is not hashed.
func goldenRelease() *releasev1.Release {
	return &releasev1.Release{
		Name:      "podinfo",
		Namespace: "apps",
		Version:   2,
		Info: &releasev1.Info{
			FirstDeployed: goldenFirstDeployed,
			LastDeployed:  goldenFirstDeployed.Add(time.Minute),
			Status:        rcommon.StatusDeployed,
			Description:   "Upgrade complete",
		},
		Chart: &chartv2.Chart{Metadata: &chartv2.Metadata{
			Name: "podinfo", Version: "6.5.0+0123456789ab", AppVersion: "6.5.0", APIVersion: "v2",
		}},
		Config:   goldenValues(),
		Manifest: "---\n# Source: x\napiVersion: v1\nkind: ConfigMap\n",
		Hooks: []*releasev1.Hook{
			{Name: "t", Kind: "Pod", Events: []releasev1.HookEvent{releasev1.HookTest},
				LastRun: releasev1.HookExecution{StartedAt: goldenFirstDeployed, Phase: releasev1.HookPhaseFailed}},
			{Name: "pre", Kind: "Job", Events: []releasev1.HookEvent{releasev1.HookPreUpgrade},
				LastRun: releasev1.HookExecution{StartedAt: goldenFirstDeployed, Phase: releasev1.HookPhaseSucceeded}},
		},
	}
}

func sha256Of(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func TestRecordDigestGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(observe(goldenRelease(), "")); err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); got != goldenObservation {
		t.Fatalf("hashed bytes:\n got %q\nwant %q", got, goldenObservation)
	}
	if got := sha256Of([]byte(goldenObservation)); got != goldenDigest {
		t.Fatalf("the vector is inconsistent: sha256 of the bytes is %s", got)
	}
	for _, tc := range []struct{ oci, want string }{
		{"", goldenDigest},
		{goldenOCIDigest, goldenDigestOCI},
	} {
		if got := RecordDigest(goldenRelease(), tc.oci); got != tc.want {
			t.Errorf("RecordDigest(ociDigest %q) = %s, want %s", tc.oci, got, tc.want)
		}
	}
}

// A record of a Helm 4.3 rollback carries rollback_revision, which
// helm-controller v1.6 (Helm 4.2) does not know: it must not be hashed.
func TestRecordDigestLeavesOutRollbackRevision(t *testing.T) {
	r := goldenRelease()
	r.Info.RollbackRevision = 1
	b, err := json.Marshal(r.Info)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"rollback_revision":1`) {
		t.Fatalf("Helm's info no longer writes rollback_revision (%s): the mirror may be dropped", b)
	}
	if got := RecordDigest(r, ""); got != goldenDigest {
		t.Fatalf("RecordDigest with rollback_revision = %s, want %s", got, goldenDigest)
	}
}

// What the digest covers: every field of the observation, not the test
// hooks, the labels, the chart's files or the apply method.
func TestRecordDigestCovers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(r *releasev1.Release)
		changes bool
	}{
		{"name", func(r *releasev1.Release) { r.Name = "other" }, true},
		{"namespace", func(r *releasev1.Release) { r.Namespace = "other" }, true},
		{"version", func(r *releasev1.Release) { r.Version = 3 }, true},
		{"status", func(r *releasev1.Release) { r.Info.Status = rcommon.StatusSuperseded }, true},
		{"notes", func(r *releasev1.Release) { r.Info.Notes = "hello" }, true},
		{"deleted", func(r *releasev1.Release) { r.Info.Deleted = goldenFirstDeployed }, true},
		{"time zone", func(r *releasev1.Release) {
			r.Info.LastDeployed = r.Info.LastDeployed.In(time.FixedZone("CET", 3600))
		}, true},
		{"chart version", func(r *releasev1.Release) { r.Chart.Metadata.Version = "6.5.0" }, true},
		{"values", func(r *releasev1.Release) { r.Config["replicaCount"] = float64(3) }, true},
		{"manifest", func(r *releasev1.Release) { r.Manifest += "\n" }, true},
		{"hook run", func(r *releasev1.Release) { r.Hooks[1].LastRun.Phase = releasev1.HookPhaseFailed }, true},
		{"test hook run", func(r *releasev1.Release) { r.Hooks[0].LastRun.Phase = releasev1.HookPhaseSucceeded }, false},
		{"test hook removed", func(r *releasev1.Release) { r.Hooks = r.Hooks[1:] }, false},
		{"labels", func(r *releasev1.Release) { r.Labels = map[string]string{"a": "b"} }, false},
		{"apply method", func(r *releasev1.Release) { r.ApplyMethod = "ssa" }, false},
		{"chart files", func(r *releasev1.Release) {
			r.Chart.Templates = []*common.File{{Name: "templates/cm.yaml", Data: []byte("x")}}
			r.Chart.Values = map[string]any{"replicaCount": 1}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := goldenRelease()
			tc.edit(r)
			if got := RecordDigest(r, ""); (got != goldenDigest) != tc.changes {
				t.Fatalf("RecordDigest = %s; golden %s; want a change: %v", got, goldenDigest, tc.changes)
			}
		})
	}
}

// Nil and empty parts are written as helm-controller writes them: values
// and hooks as null, info and chart metadata as {}.
func TestRecordDigestEmptyParts(t *testing.T) {
	r := &releasev1.Release{Name: "a", Namespace: "b", Version: 1, Config: map[string]any{},
		Hooks: []*releasev1.Hook{{Name: "t", Events: []releasev1.HookEvent{releasev1.HookTest}}}}
	want := "{\"name\":\"a\",\"version\":1,\"info\":{},\"chartMetadata\":{},\"config\":null,\"manifest\":\"\",\"hooks\":null,\"namespace\":\"b\"}\n"
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(observe(r, "")); err != nil {
		t.Fatal(err)
	}
	if buf.String() != want {
		t.Fatalf("hashed bytes:\n got %q\nwant %q", buf.String(), want)
	}
	if got := RecordDigest(r, ""); got != sha256Of([]byte(want)) {
		t.Fatalf("RecordDigest = %s, want %s", got, sha256Of([]byte(want)))
	}
}

func TestConfigDigestGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := chartutil.Encode(&buf, goldenValues(), chartutil.SortMapSlice); err != nil {
		t.Fatal(err)
	}
	if buf.String() != goldenConfigYAML {
		t.Fatalf("hashed YAML:\n got %q\nwant %q", buf.String(), goldenConfigYAML)
	}
	if got := sha256Of([]byte(goldenConfigYAML)); got != goldenConfig {
		t.Fatalf("the vector is inconsistent: sha256 of the YAML is %s", got)
	}
	intValues := goldenValues()
	intValues["replicaCount"] = 2 // an int in memory hashes as the float64 from JSON
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"golden", goldenValues(), goldenConfig},
		{"int", intValues, goldenConfig},
		{"nil", nil, emptyConfig},
		{"empty", map[string]any{}, emptyConfig},
	} {
		if got := ConfigDigest(tc.values); got != tc.want {
			t.Errorf("%s: ConfigDigest = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestSnapshotOf(t *testing.T) {
	r := goldenRelease()
	r.Info.Deleted = goldenFirstDeployed.Add(time.Hour)
	got := SnapshotOf(r, "upgrade", goldenOCIDigest)
	want := Snapshot{
		APIVersion:    "v2",
		Digest:        RecordDigest(r, goldenOCIDigest),
		Name:          "podinfo",
		Namespace:     "apps",
		Version:       2,
		Status:        "deployed",
		Action:        "upgrade",
		ChartName:     "podinfo",
		ChartVersion:  "6.5.0+0123456789ab",
		AppVersion:    "6.5.0",
		ConfigDigest:  goldenConfig,
		FirstDeployed: goldenFirstDeployed,
		LastDeployed:  goldenFirstDeployed.Add(time.Minute),
		Deleted:       goldenFirstDeployed.Add(time.Hour),
		OCIDigest:     goldenOCIDigest,
	}
	if !snapshotsEqual(got, want) {
		t.Fatalf("SnapshotOf:\n got %+v\nwant %+v", got, want)
	}
	if got.TestHooks != nil {
		t.Fatalf("a new snapshot is not tested; TestHooks = %v", got.TestHooks)
	}
	if got := SnapshotOf(&releasev1.Release{Name: "a"}, "install", ""); got.ConfigDigest != emptyConfig || got.Status != "" || got.ChartName != "" {
		t.Fatalf("SnapshotOf a bare record = %+v", got)
	}
}

func snapshotsEqual(a, b Snapshot) bool {
	return a.APIVersion == b.APIVersion && a.Digest == b.Digest && a.Name == b.Name &&
		a.Namespace == b.Namespace && a.Version == b.Version && a.Status == b.Status &&
		a.Action == b.Action && a.ChartName == b.ChartName && a.ChartVersion == b.ChartVersion &&
		a.AppVersion == b.AppVersion && a.ConfigDigest == b.ConfigDigest &&
		a.FirstDeployed.Equal(b.FirstDeployed) && a.LastDeployed.Equal(b.LastDeployed) &&
		a.Deleted.Equal(b.Deleted) && maps.Equal(a.TestHooks, b.TestHooks) && a.OCIDigest == b.OCIDigest
}

// The digest of a record is the same when computed from the release Helm
// stores and from the record read back from its Secret, whether Helm's
// Secret driver or this package's wrote it: values come back as float64,
// times keep their zone, labels come and go.
func TestRecordDigestSecretRoundTrip(t *testing.T) {
	r := goldenRelease()
	r.Config = map[string]any{"replicaCount": 2, "big": int64(1) << 40, "ratio": 0.5, "html": "<a&b>"}
	r.Info.LastDeployed = r.Info.LastDeployed.In(time.FixedZone("CEST", 2*3600))
	r.Labels = map[string]string{"team": "a"}
	r.Chart.Templates = []*common.File{{Name: "templates/cm.yaml", Data: []byte("kind: ConfigMap")}}
	want := RecordDigest(r, goldenOCIDigest)
	const key = "sh.helm.release.v1.podinfo.v2"

	secrets := &memSecrets{objs: map[string]*corev1.Secret{}}
	if err := driver.NewSecrets(secrets).Create(key, r); err != nil {
		t.Fatal(err)
	}
	back, err := driver.NewSecrets(secrets).Get(key)
	if err != nil {
		t.Fatal(err)
	}
	if got := RecordDigest(back.(*releasev1.Release), goldenOCIDigest); got != want {
		t.Errorf("Helm's Secret driver: digest %s after the round trip, %s before", got, want)
	}

	data, err := encodeRelease(r)
	if err != nil {
		t.Fatal(err)
	}
	for name, payload := range map[string][]byte{"this package's": data, "Helm's": secrets.objs[key].Data["release"]} {
		back, err := decodeRelease(payload, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := back.Config["replicaCount"].(float64); !ok {
			t.Fatalf("values did not come back from JSON: %T", back.Config["replicaCount"])
		}
		if got := RecordDigest(back, goldenOCIDigest); got != want {
			t.Errorf("decoding %s payload: digest %s after the round trip, %s before", name, got, want)
		}
	}
}

// memSecrets is the part of a Secret client that Helm's driver uses to
// create and read one record.
type memSecrets struct {
	typedcorev1.SecretInterface
	objs map[string]*corev1.Secret
}

func (m *memSecrets) Create(_ context.Context, s *corev1.Secret, _ metav1.CreateOptions) (*corev1.Secret, error) {
	if _, ok := m.objs[s.Name]; ok {
		return nil, apierrors.NewAlreadyExists(corev1.Resource("secrets"), s.Name)
	}
	m.objs[s.Name] = s.DeepCopy()
	return s, nil
}

func (m *memSecrets) Get(_ context.Context, name string, _ metav1.GetOptions) (*corev1.Secret, error) {
	s, ok := m.objs[name]
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("secrets"), name)
	}
	return s.DeepCopy(), nil
}
