package engine_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/engine/crds"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

// InstallCRDs applies a CRD when it is missing or its digest annotation
// differs, and leaves an unchanged CRD unwritten.
func TestInstallCRDsAppliesOnlyWhatChanged(t *testing.T) {
	ctx := context.Background()
	if err := engine.InstallCRDs(ctx, cp.Config, "cozy-aio"); err != nil {
		t.Fatal(err)
	}
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string) *apiextensionsv1.CustomResourceDefinition {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := cp.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			t.Fatal(err)
		}
		return crd
	}
	before := map[string]string{}
	for _, c := range all {
		live := read(c.Name)
		if live.Annotations[engine.CRDDigestAnnotation] == "" {
			t.Fatalf("CRD %s has no %s annotation", c.Name, engine.CRDDigestAnnotation)
		}
		before[c.Name] = live.ResourceVersion
	}

	// One CRD drifts: its digest no longer matches.
	drifted := read(all[0].Name)
	drifted.Annotations[engine.CRDDigestAnnotation] = "sha256:other"
	if err := cp.Client.Update(ctx, drifted); err != nil {
		t.Fatal(err)
	}
	// A replica that may not lead installs only what is missing: the
	// drifted CRD stays as it is until the leader installs.
	if err := engine.InstallMissingCRDs(ctx, cp.Config, "cozy-aio"); err != nil {
		t.Fatal(err)
	}
	if got := read(all[0].Name).Annotations[engine.CRDDigestAnnotation]; got != "sha256:other" {
		t.Fatalf("InstallMissingCRDs rewrote an existing CRD (digest now %s)", got)
	}
	if err := engine.InstallCRDs(ctx, cp.Config, "cozy-aio"); err != nil {
		t.Fatal(err)
	}
	for _, c := range all {
		live := read(c.Name)
		if c.Name == all[0].Name {
			if live.Annotations[engine.CRDDigestAnnotation] == "sha256:other" {
				t.Errorf("CRD %s whose digest differed was not applied again", c.Name)
			}
			continue
		}
		if live.ResourceVersion != before[c.Name] {
			t.Errorf("unchanged CRD %s was written again (resourceVersion %s → %s)", c.Name, before[c.Name], live.ResourceVersion)
		}
	}
}

// A cozy-aio rolled back to an older binary starts on the CRDs a newer one
// installed: InstallCRDs leaves a CRD that stores a version the embedded
// one does not list as it is, says so in the log, and installs the rest.
func TestInstallCRDsLeavesANewerCRD(t *testing.T) {
	ctx := context.Background()
	// A cluster of its own: the newer CRD cannot be taken back once a
	// version is stored, and the other tests need the embedded ones.
	other, err := testenv.StartControlPlane(testenv.ControlPlaneOptions{Scheme: engine.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Stop() })
	if err := engine.InstallCRDs(ctx, other.Config, "cozy-aio"); err != nil {
		t.Fatal(err)
	}
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string) (*apiextensionsv1.CustomResourceDefinition, error) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		return crd, other.Client.Get(ctx, client.ObjectKey{Name: name}, crd)
	}

	// A newer cozy-aio stores HelmReleases as v99 and wrote its digest.
	newer, err := read(all[0].Name)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range newer.Spec.Versions {
		if v.Storage {
			next := *v.DeepCopy()
			next.Name = "v99"
			newer.Spec.Versions[i].Storage = false
			newer.Spec.Versions = append(newer.Spec.Versions, next)
			break
		}
	}
	newer.Annotations[engine.CRDDigestAnnotation] = "sha256:newer"
	if err := other.Client.Update(ctx, newer); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "v99 among the stored versions", func() bool {
		newer, err = read(all[0].Name)
		return err == nil && slices.Contains(newer.Status.StoredVersions, "v99")
	})
	// And another CRD is missing.
	if err := other.Client.Delete(ctx, all[1]); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "CRD "+all[1].Name+" deleted", func() bool {
		_, err := read(all[1].Name)
		return apierrors.IsNotFound(err)
	})

	var logged []string
	lctx := logr.NewContext(ctx, funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{}))
	if err := engine.InstallCRDs(lctx, other.Config, "cozy-aio"); err != nil {
		t.Fatalf("InstallCRDs on a newer CRD: %v", err)
	}
	after, err := read(all[0].Name)
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != newer.ResourceVersion || after.Annotations[engine.CRDDigestAnnotation] != "sha256:newer" {
		t.Fatalf("the newer CRD was written (resourceVersion %s → %s, digest %s)",
			newer.ResourceVersion, after.ResourceVersion, after.Annotations[engine.CRDDigestAnnotation])
	}
	if !slices.ContainsFunc(logged, func(l string) bool { return strings.Contains(l, all[0].Name) && strings.Contains(l, "v99") }) {
		t.Errorf("no log line names the newer CRD %s and its version v99: %q", all[0].Name, logged)
	}
	if _, err := read(all[1].Name); err != nil {
		t.Fatalf("the missing CRD beside the newer one: %v", err)
	}
}
