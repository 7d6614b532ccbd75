package helm

import (
	"strings"
	"testing"
	"time"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
)

func TestReleaseAdoptionOutOfSync(t *testing.T) {
	const (
		revision = "1.0.0@sha256:9933f58f8bf459eb199d59ebc8a05683f3944e1242d9f5467d99aa2cf08a5370"
		oci      = "sha256:9933f58f8bf459eb199d59ebc8a05683f3944e1242d9f5467d99aa2cf08a5370"
	)
	record := func(version string) *releasev1.Release {
		at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
		return &releasev1.Release{
			Name: "app", Namespace: "apps", Version: 1,
			Info:     &releasev1.Info{FirstDeployed: at, LastDeployed: at, Status: rcommon.StatusDeployed, Description: "Install complete"},
			Chart:    &chartv2.Chart{Metadata: &chartv2.Metadata{Name: "demo", Version: version, APIVersion: "v2"}},
			Config:   map[string]any{"color": "green"},
			Manifest: "---\nkind: ConfigMap\n",
		}
	}
	chart := &chartv2.Metadata{Name: "demo", Version: "1.0.0"}
	values := map[string]any{"color": "green"}
	mutated := "1.0.0+9933f58f8bf4"
	for _, c := range []struct {
		name     string
		record   *releasev1.Release
		snap     func(*Snapshot)
		revision string
		values   map[string]any
		want     string // "" or a part of the reason
	}{
		{name: "in sync, OCIRepository", record: record(mutated), revision: revision},
		{name: "in sync, HelmChart", record: record("1.0.0")},
		{name: "legacy snapshot", record: record(mutated), revision: revision, snap: func(s *Snapshot) { s.APIVersion = "" }, want: "API version"},
		{name: "other revision", record: record(mutated), revision: revision, snap: func(s *Snapshot) { s.Version = 2 }, want: "not of the latest record"},
		{name: "other release", record: record(mutated), revision: revision, snap: func(s *Snapshot) { s.Name = "other" }, want: "not of the latest record"},
		{name: "record changed", record: record(mutated), revision: revision, snap: func(s *Snapshot) { s.Digest = RecordDigest(record("9.9.9"), oci) }, want: "digest"},
		{name: "other OCI digest", record: record(mutated), revision: revision, snap: func(s *Snapshot) { s.OCIDigest = "" }, want: "digest"},
		{name: "chart digest not in the version", record: record("1.0.0"), revision: revision, want: "not demo@" + mutated},
		{name: "new artifact", record: record(mutated), revision: "1.0.0@sha256:0000000000000000000000000000000000000000000000000000000000000000", want: "not demo@1.0.0+000000000000"},
		{name: "revision of another version", record: record(mutated), revision: "2.0.0@" + oci, want: "does not match chart version"},
		{name: "values changed", record: record(mutated), revision: revision, values: map[string]any{"color": "red"}, want: "values changed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := SnapshotOf(c.record, "install", oci)
			if c.revision == "" {
				s = SnapshotOf(c.record, "install", "")
			}
			if c.snap != nil {
				c.snap(&s)
			}
			v := values
			if c.values != nil {
				v = c.values
			}
			got := Adoption{Snapshot: s, Revision: c.revision}.OutOfSync(c.record, chart, v)
			if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
				t.Fatalf("OutOfSync = %q, want %q", got, c.want)
			}
		})
	}
	superseded := record(mutated)
	s := SnapshotOf(superseded, "install", oci)
	superseded.Info.Status = rcommon.StatusSuperseded
	if got := (Adoption{Snapshot: s, Revision: revision}).OutOfSync(superseded, chart, values); !strings.Contains(got, "superseded") {
		t.Fatalf("OutOfSync of a superseded record = %q", got)
	}
}
