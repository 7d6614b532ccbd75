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
	got := map[string]bool{}
	for _, c := range all {
		for _, v := range c.Spec.Versions {
			if v.Storage {
				got[c.Spec.Group+"/"+v.Name+"/"+c.Spec.Names.Kind] = true
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
		"notification.toolkit.fluxcd.io/v1beta3/Provider",
		"notification.toolkit.fluxcd.io/v1beta3/Alert",
		"notification.toolkit.fluxcd.io/v1/Receiver",
	} {
		if !got[want] {
			t.Errorf("missing CRD storage version %s (have %v)", want, got)
		}
	}
	if len(all) != 12 {
		t.Errorf("want 12 CRDs, got %d", len(all))
	}
}
