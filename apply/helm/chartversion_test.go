package helm

import "testing"

func TestChartVersionWithDigest(t *testing.T) {
	const (
		hexDigest = "9933f58f8bf459eb199d59ebc8a05683f3944e1242d9f5467d99aa2cf08a5370"
		sha       = "sha256:" + hexDigest
	)
	for _, tc := range []struct {
		name, chart, revision string
		version, ociDigest    string
		err                   string
	}{
		{name: "semver tag", chart: "6.5.0", revision: "6.5.0@" + sha,
			version: "6.5.0+9933f58f8bf4", ociDigest: sha},
		{name: "digest only", chart: "6.5.0", revision: sha,
			version: "6.5.0+9933f58f8bf4", ociDigest: sha},
		{name: "non-semver tag keeps the whole revision", chart: "6.5.0", revision: "latest@" + sha,
			version: "6.5.0+9933f58f8bf4", ociDigest: "latest@" + sha},
		{name: "git revision", chart: "0.1.0", revision: "main@sha1:0123456789abcdef0123456789abcdef01234567",
			version: "0.1.0+0123456789ab", ociDigest: "main@sha1:0123456789abcdef0123456789abcdef01234567"},
		{name: "v prefix", chart: "v1.2.3", revision: sha,
			version: "1.2.3+9933f58f8bf4", ociDigest: sha},
		{name: "v prefix in the tag", chart: "1.2.3", revision: "v1.2.3@" + sha,
			version: "1.2.3+9933f58f8bf4", ociDigest: sha},
		{name: "two-part version", chart: "1.2", revision: sha,
			version: "1.2.0+9933f58f8bf4", ociDigest: sha},
		{name: "build metadata replaced", chart: "1.2.3+old", revision: sha,
			version: "1.2.3+9933f58f8bf4", ociDigest: sha},
		{name: "prerelease", chart: "1.2.3-rc.1", revision: "1.2.3-rc.1@" + sha,
			version: "1.2.3-rc.1+9933f58f8bf4", ociDigest: sha},
		{name: "tag metadata ignored", chart: "1.2.3+old", revision: "1.2.3_build.7@" + sha,
			version: "1.2.3+9933f58f8bf4", ociDigest: sha},
		{name: "tag not the chart version", chart: "6.5.0", revision: "6.4.0@" + sha,
			err: "artifact revision 6.4.0 does not match chart version 6.5.0"},
		{name: "prerelease tag not the chart version", chart: "1.2.3", revision: "1.2.3-rc.1@" + sha,
			err: "artifact revision 1.2.3-rc.1 does not match chart version 1.2.3"},
		{name: "semver without digest", chart: "6.5.0", revision: "6.5.0",
			err: "artifact revision 6.5.0 does not match chart version 6.5.0"},
		{name: "two @", chart: "6.5.0", revision: "6.5.0@x@" + sha,
			err: "artifact revision 6.5.0 does not match chart version 6.5.0"},
		{name: "short digest after a tag", chart: "6.5.0", revision: "6.5.0@sha256:0123456789a",
			err: "invalid artifact revision sha256:0123456789a"},
		{name: "tag digest without algorithm", chart: "6.5.0", revision: "6.5.0@" + hexDigest,
			err: "invalid artifact revision " + hexDigest},
		{name: "short digest", chart: "6.5.0", revision: "sha256:0123",
			err: "invalid artifact revision sha256:0123"},
		{name: "no digest", chart: "6.5.0", revision: "latest",
			err: "invalid artifact revision latest"},
		{name: "two colons", chart: "6.5.0", revision: "a:b:" + hexDigest,
			err: "invalid artifact revision a:b:" + hexDigest},
		{name: "invalid chart version", chart: "not-a-version", revision: sha,
			err: "invalid chart version not-a-version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			version, ociDigest, err := ChartVersionWithDigest(tc.chart, tc.revision)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error = %v, want %q (version %q, ociDigest %q)", err, tc.err, version, ociDigest)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if version != tc.version || ociDigest != tc.ociDigest {
				t.Fatalf("= %q, %q; want %q, %q", version, ociDigest, tc.version, tc.ociDigest)
			}
		})
	}
}
