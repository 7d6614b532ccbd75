package engine_test

import (
	"context"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/engine/crds"
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
