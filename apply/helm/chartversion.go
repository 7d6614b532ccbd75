package helm

import (
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// ChartVersionWithDigest is the chart version helm-controller installs
// from a source artifact with an OCI-style revision (an OCIRepository's,
// or an ExternalArtifact's that contains ":"), and the OCI digest it
// records with the release. The version gets the first 12 hex digits of
// the artifact's digest as build metadata, replacing any it had, in
// canonical SemVer form: chart 6.5.0 from revision
// "6.5.0@sha256:9933f58f8bf4…" is installed as 6.5.0+9933f58f8bf4, so a
// new artifact under the same tag is a new chart version.
//
// A revision whose tag is a SemVer version ("_" standing for "+", as in
// OCI tags) must name the chart's version, build metadata aside, and its
// OCI digest is the part after "@". Any other revision (a bare digest,
// "latest@sha256:…", "main@sha1:…") is kept whole as the OCI digest.
//
// With digest tracking disabled helm-controller keeps the chart's version
// but still records ociDigest. The errors are helm-controller's words.
func ChartVersionWithDigest(chartVersion, revision string) (version, ociDigest string, err error) {
	ver, err := semver.NewVersion(chartVersion)
	if err != nil {
		return "", "", fmt.Errorf("invalid chart version %s", chartVersion)
	}
	ociDigest = revision
	if tag, ok := semverTag(revision); ok {
		parts := strings.Split(revision, "@")
		if len(parts) != 2 || !tag.Equal(ver) {
			return "", "", fmt.Errorf("artifact revision %s does not match chart version %s", parts[0], chartVersion)
		}
		ociDigest = parts[1]
	}
	short, err := shortDigest(ociDigest)
	if err != nil {
		return "", "", err
	}
	next, err := ver.SetMetadata(short)
	if err != nil {
		return "", "", err
	}
	return next.String(), ociDigest, nil
}

// semverTag parses the tag of a "<tag>@<digest>" revision, or the whole
// revision when it has no "@", as a SemVer version.
func semverTag(revision string) (*semver.Version, bool) {
	tag, _, _ := strings.Cut(revision, "@")
	v, err := semver.NewVersion(strings.ReplaceAll(tag, "_", "+"))
	return v, err == nil
}

// shortDigest is the first 12 characters after the only ":" of s.
func shortDigest(s string) (string, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 2 || len(parts[1]) < 12 {
		return "", fmt.Errorf("invalid artifact revision %s", s)
	}
	return parts[1][:12], nil
}

// ChartVersionError means the chart's version could not be given the
// digest of Chart.Revision (see ChartVersionWithDigest): nothing was done
// to the release. Its message is helm-controller's.
type ChartVersionError struct {
	Err error
}

func (e *ChartVersionError) Error() string { return e.Err.Error() }

func (e *ChartVersionError) Unwrap() error { return e.Err }

// StateDigest is the State.Digest of failure counts for a chart version
// (as installed, see ChartVersionWithDigest) and a ConfigDigest of the
// values: a new chart version or new values start the counts again, as
// helm-controller's failure reset. A caller that keeps the two, as a
// HelmRelease's status.lastAttemptedRevision and lastAttemptedConfigDigest,
// rebuilds the state's digest from them.
func StateDigest(chartVersion, configDigest string) string {
	return chartVersion + " " + configDigest
}
