package helm_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	rcommon "helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	if err := ours.Create("sh.helm.release.v1.app.v2", rev(2, rcommon.StatusDeployed)); !errors.Is(err, driver.ErrReleaseExists) || !errors.Is(err, helm.ErrRecordConflict) {
		t.Fatalf("creating an existing revision: %v, want ErrReleaseExists and ErrRecordConflict", err)
	}
	// A driver lives for one session, and a refused write ends the
	// session's writes: go on with a new one.
	ours = helm.NewReleaseSecrets(cs.CoreV1().Secrets(ns))
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

// TestReleaseSecretsRefuseStaleWrites: an update or delete of a revision
// that another writer changed since the driver read it is refused, and so
// is every write after it; a revision the driver never read is read first.
func TestReleaseSecretsRefuseStaleWrites(t *testing.T) {
	ns := cp.Namespace(t)
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	secrets := cs.CoreV1().Secrets(ns)
	other := helm.NewReleaseSecrets(secrets)
	rev := func(v int, st rcommon.Status) *releasev1.Release {
		return &releasev1.Release{Name: "app", Namespace: ns, Version: v, Info: &releasev1.Info{Status: st}}
	}
	for v := 1; v <= 3; v++ {
		if err := other.Create(fmt.Sprintf("sh.helm.release.v1.app.v%d", v), rev(v, rcommon.StatusSuperseded)); err != nil {
			t.Fatal(err)
		}
	}
	key := func(v int) string { return fmt.Sprintf("sh.helm.release.v1.app.v%d", v) }

	// Never read: the update reads the revision first and succeeds.
	if err := helm.NewReleaseSecrets(secrets).Update(key(3), rev(3, rcommon.StatusDeployed)); err != nil {
		t.Fatalf("update of a revision not read before: %v", err)
	}

	stale := helm.NewReleaseSecrets(secrets)
	if _, err := stale.Query(map[string]string{"name": "app", "owner": "helm"}); err != nil {
		t.Fatal(err)
	}
	if err := other.Update(key(1), rev(1, rcommon.StatusFailed)); err != nil {
		t.Fatal(err)
	}
	before, err := secrets.Get(context.Background(), key(1), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = stale.Update(key(1), rev(1, rcommon.StatusDeployed))
	if !errors.Is(err, helm.ErrRecordConflict) || !strings.Contains(err.Error(), "revision 1 of release app") {
		t.Fatalf("stale update: %v, want ErrRecordConflict naming revision 1 of app", err)
	}
	if after, _ := secrets.Get(context.Background(), key(1), metav1.GetOptions{}); after.ResourceVersion != before.ResourceVersion {
		t.Fatal("the stale update was written")
	}
	// Revision 2 is unchanged, but the driver writes nothing any more.
	if _, err := stale.Delete(key(2)); !errors.Is(err, helm.ErrRecordConflict) {
		t.Fatalf("delete after a conflict: %v, want ErrRecordConflict", err)
	}
	if _, err := secrets.Get(context.Background(), key(2), metav1.GetOptions{}); err != nil {
		t.Fatalf("revision 2 after a refused delete: %v", err)
	}

	// A delete of a revision changed since it was read is refused.
	stale = helm.NewReleaseSecrets(secrets)
	if _, err := stale.Get(key(2)); err != nil {
		t.Fatal(err)
	}
	if err := other.Update(key(2), rev(2, rcommon.StatusFailed)); err != nil {
		t.Fatal(err)
	}
	if _, err := stale.Delete(key(2)); !errors.Is(err, helm.ErrRecordConflict) {
		t.Fatalf("stale delete: %v, want ErrRecordConflict", err)
	}
	if _, err := secrets.Get(context.Background(), key(2), metav1.GetOptions{}); err != nil {
		t.Fatalf("revision 2 after a stale delete: %v", err)
	}
}
