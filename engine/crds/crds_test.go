package crds_test

import (
	"testing"

	"github.com/cozystack/cozy-aio/engine/crds"
)

func TestAllCoversTheReconciledKinds(t *testing.T) {
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	got, served := map[string]bool{}, map[string]bool{}
	for _, c := range all {
		for _, v := range c.Spec.Versions {
			if v.Storage {
				got[c.Spec.Group+"/"+v.Name+"/"+c.Spec.Names.Kind] = true
			}
			if v.Served {
				served[c.Spec.Group+"/"+v.Name+"/"+c.Spec.Names.Kind] = true
			}
		}
	}
	for _, want := range []string{
		"source.toolkit.fluxcd.io/v1/GitRepository",
		"source.toolkit.fluxcd.io/v1/OCIRepository",
		"source.toolkit.fluxcd.io/v1/Bucket",
		"source.toolkit.fluxcd.io/v1/ExternalArtifact",
		"source.toolkit.fluxcd.io/v1/HelmRepository",
		"source.toolkit.fluxcd.io/v1/HelmChart",
		"source.extensions.fluxcd.io/v1beta1/ArtifactGenerator",
		"kustomize.toolkit.fluxcd.io/v1/Kustomization",
		"helm.toolkit.fluxcd.io/v2/HelmRelease",
		// Flux 2.10 stores Provider and Alert as v1.
		"notification.toolkit.fluxcd.io/v1/Provider",
		"notification.toolkit.fluxcd.io/v1/Alert",
		"notification.toolkit.fluxcd.io/v1/Receiver",
	} {
		if !got[want] {
			t.Errorf("missing CRD storage version %s (have %v)", want, got)
		}
	}
	// ... and still serves v1beta3, the version the engine reads them in.
	for _, want := range []string{"notification.toolkit.fluxcd.io/v1beta3/Provider", "notification.toolkit.fluxcd.io/v1beta3/Alert"} {
		if !served[want] {
			t.Errorf("%s is not served", want)
		}
	}
	if len(all) != 12 {
		t.Errorf("want 12 CRDs, got %d", len(all))
	}
}
