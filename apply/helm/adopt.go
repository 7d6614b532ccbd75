package helm

import (
	"fmt"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
)

// Adoption is what helm-controller recorded about a release it made, so
// that Reconcile can take the release over without an upgrade when
// helm-controller itself would leave it alone (ReconcileOptions.Adopt).
type Adoption struct {
	// Snapshot is helm-controller's record of the latest revision (a
	// HelmRelease's status.history[0]).
	Snapshot Snapshot
	// Revision is the revision of the chart's source artifact when
	// helm-controller adds its digest to the chart version it installs: an
	// OCIRepository's, or an ExternalArtifact's that contains ":" (see
	// ChartVersionWithDigest). Default "": the chart's own version, as for
	// a chart from a HelmChart.
	Revision string
}

// OutOfSync says why record, the latest revision of a release, is not up
// to date with a chart of metadata chart and the composed values, as
// helm-controller decides it from its snapshot; "" when it is up to date:
//
//   - the snapshot has APIVersion "v2" and names the record (release name,
//     namespace and revision);
//   - the record is deployed and its RecordDigest, with the snapshot's OCI
//     digest, is the snapshot's Digest: nobody changed it since;
//   - the record's chart name and version are the chart's, the version as
//     helm-controller installs it (with Revision's digest);
//   - the snapshot's ConfigDigest is ConfigDigest of values.
//
// Older snapshots, whose digest helm-controller does not check, are never
// up to date here: the release is upgraded once.
func (a Adoption) OutOfSync(record *releasev1.Release, chart *chartv2.Metadata, values map[string]any) string {
	s := a.Snapshot
	switch {
	case record == nil || record.Info == nil:
		return "no release record"
	case s.APIVersion != SnapshotAPIVersion:
		return fmt.Sprintf("snapshot API version %q, not %q", s.APIVersion, SnapshotAPIVersion)
	case s.Name != record.Name || s.Namespace != record.Namespace || s.Version != record.Version:
		return fmt.Sprintf("snapshot of %s/%s.v%d, not of the latest record %s/%s.v%d",
			s.Namespace, s.Name, s.Version, record.Namespace, record.Name, record.Version)
	case record.Info.Status != rcommon.StatusDeployed:
		return "latest record is " + record.Info.Status.String()
	case RecordDigest(record, s.OCIDigest) != s.Digest:
		return "release record does not match the snapshot's digest"
	}
	if chart == nil {
		return "chart has no metadata"
	}
	version := chart.Version
	if a.Revision != "" {
		v, _, err := ChartVersionWithDigest(chart.Version, a.Revision)
		if err != nil {
			return err.Error()
		}
		version = v
	}
	var name, have string
	if record.Chart != nil && record.Chart.Metadata != nil {
		name, have = record.Chart.Metadata.Name, record.Chart.Metadata.Version
	}
	if name != chart.Name || have != version {
		return fmt.Sprintf("release chart %s@%s, not %s@%s", name, have, chart.Name, version)
	}
	if s.ConfigDigest != ConfigDigest(values) {
		return "release values changed"
	}
	return ""
}
