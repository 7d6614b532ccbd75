package helm_test

import (
	"errors"
	"testing"

	rcommon "helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	"k8s.io/client-go/kubernetes"

	"github.com/cozystack/cozy-aio/apply/helm"
)

// TestReleaseSecretsCompatibleWithHelm writes revisions with cozy-aio's
// Secret driver and with Helm's own, and reads each with the other.
func TestReleaseSecretsCompatibleWithHelm(t *testing.T) {
	ns := cp.Namespace(t)
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	ours := helm.NewReleaseSecrets(cs.CoreV1().Secrets(ns))
	theirs := driver.NewSecrets(cs.CoreV1().Secrets(ns))
	rev := func(v int, st rcommon.Status) *releasev1.Release {
		return &releasev1.Release{
			Name: "app", Namespace: ns, Version: v, Manifest: "kind: ConfigMap\n",
			Info:   &releasev1.Info{Status: st, Description: "revision " + string(st)},
			Labels: map[string]string{"team": "a"},
		}
	}
	if err := ours.Create("sh.helm.release.v1.app.v1", rev(1, rcommon.StatusSuperseded)); err != nil {
		t.Fatal(err)
	}
	if err := theirs.Create("sh.helm.release.v1.app.v2", rev(2, rcommon.StatusDeployed)); err != nil {
		t.Fatal(err)
	}
	if err := ours.Create("sh.helm.release.v1.app.v2", rev(2, rcommon.StatusDeployed)); !errors.Is(err, driver.ErrReleaseExists) {
		t.Fatalf("creating an existing revision: %v, want ErrReleaseExists", err)
	}
	for name, d := range map[string]driver.Driver{"ours": ours, "helm's": theirs} {
		for _, key := range []string{"sh.helm.release.v1.app.v1", "sh.helm.release.v1.app.v2"} {
			r, err := d.Get(key)
			if err != nil {
				t.Fatalf("%s driver reading %s: %v", name, key, err)
			}
			rel := r.(*releasev1.Release)
			if rel.Manifest != "kind: ConfigMap\n" || rel.Labels["team"] != "a" || rel.Labels["owner"] != "" {
				t.Fatalf("%s driver read %s as %+v (labels %v)", name, key, rel, rel.Labels)
			}
		}
		deployed, err := d.Query(map[string]string{"name": "app", "owner": "helm", "status": "deployed"})
		if err != nil || len(deployed) != 1 || deployed[0].(*releasev1.Release).Version != 2 {
			t.Fatalf("%s driver: deployed query = %v, %v", name, deployed, err)
		}
		if _, err := d.Query(map[string]string{"name": "missing", "owner": "helm"}); !errors.Is(err, driver.ErrReleaseNotFound) {
			t.Fatalf("%s driver: query of a missing release: %v", name, err)
		}
	}
	// An update by one is read by the other, with Helm's labels.
	up := rev(2, rcommon.StatusFailed)
	if err := ours.Update("sh.helm.release.v1.app.v2", up); err != nil {
		t.Fatal(err)
	}
	failed, err := theirs.Query(map[string]string{"name": "app", "owner": "helm", "status": "failed"})
	if err != nil || len(failed) != 1 {
		t.Fatalf("helm's driver after our update: %v, %v", failed, err)
	}
	if l := failed[0].(*releasev1.Release).Labels; l["modifiedAt"] == "" || l["version"] != "2" {
		t.Fatalf("labels after update: %v", l)
	}
	if _, err := ours.Delete("sh.helm.release.v1.app.v1"); err != nil {
		t.Fatal(err)
	}
	if _, err := theirs.Get("sh.helm.release.v1.app.v1"); !errors.Is(err, driver.ErrReleaseNotFound) {
		t.Fatalf("after delete, helm's driver reads %v", err)
	}
}
