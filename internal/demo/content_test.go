package demo

import (
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"sigs.k8s.io/yaml"
)

func TestTenantsKeepTheTotalWithUnevenSizes(t *testing.T) {
	for _, c := range []struct{ tenants, releases int }{{20, 5}, {200, 5}, {3, 2}, {7, 3}, {1, 1}} {
		ts := Tenants(c.tenants, c.releases, false)
		total, sizes := 0, map[int]bool{}
		for _, tn := range ts {
			if tn.Releases < 1 {
				t.Fatalf("%d×%d: tenant %s has %d releases", c.tenants, c.releases, tn.Name, tn.Releases)
			}
			total += tn.Releases
			sizes[tn.Releases] = true
		}
		if total != c.tenants*c.releases {
			t.Fatalf("%d×%d: %d releases in all", c.tenants, c.releases, total)
		}
		if c.tenants >= 4 && c.releases >= 2 && len(sizes) < 2 {
			t.Fatalf("%d×%d: every tenant has the same size", c.tenants, c.releases)
		}
	}
	broken := Tenants(3, 2, true)
	if !broken[1].Broken || broken[0].Broken || broken[2].Broken {
		t.Fatalf("broken tenants: %+v", broken)
	}
}

func TestContentParses(t *testing.T) {
	ts := Tenants(4, 3, true)
	docs := strings.Split(bootstrapObjects(ts, false, "http://git/platform", "u", "p", "oci://reg/packages/charts", []byte(`{"auths":{}}`)), "\n---\n")
	var kinds []string
	for _, d := range docs {
		var o map[string]any
		if err := yaml.Unmarshal([]byte(d), &o); err != nil {
			t.Fatalf("bootstrap object does not parse: %v\n%s", err, d)
		}
		kinds = append(kinds, o["kind"].(string))
	}
	if got := strings.Join(kinds, ","); got != "Namespace,Secret,Secret,OCIRepository,GitRepository,HelmRelease,Kustomization,ArtifactGenerator" {
		t.Fatalf("bootstrap kinds: %s", got)
	}
	var gen struct {
		Spec struct {
			Artifacts []struct {
				Name string
				Copy []struct{ From, To string }
			}
		}
	}
	if err := yaml.Unmarshal([]byte(docs[len(docs)-1]), &gen); err != nil {
		t.Fatal(err)
	}
	if len(gen.Spec.Artifacts) != 1+len(ts) {
		t.Fatalf("%d generator outputs, want the network and one per tenant", len(gen.Spec.Artifacts))
	}
	if c := gen.Spec.Artifacts[2].Copy; len(c) != 3 || !strings.Contains(c[2].From, "broken") {
		t.Fatalf("the broken tenant's package: %+v", c)
	}
	for path, doc := range platformRepo(ts, 0) {
		for _, d := range strings.Split(doc, "\n---\n") {
			var o map[string]any
			if err := yaml.Unmarshal([]byte(d), &o); err != nil {
				t.Fatalf("%s does not parse: %v", path, err)
			}
		}
	}
}

// The tenant clusters' addons: each cluster's file decodes strictly as
// HelmReleases with spec.kubeConfig to that cluster's Secret, whose
// dependsOn name addons of the same cluster; the generator gains the two
// addon charts.
func TestClusterAddonsParse(t *testing.T) {
	ts := Tenants(2, 1, false)
	files := platformRepo(ts, 2)
	names := map[string]bool{}
	for _, a := range addons {
		names[a.name] = true
	}
	for i := 1; i <= 2; i++ {
		name := clusterName(i)
		doc, ok := files["platform/"+name+".yaml"]
		if !ok {
			t.Fatalf("no platform file for %s", name)
		}
		parts := strings.Split(doc, "---\n")
		if len(parts) != len(addons) {
			t.Fatalf("%s: %d documents, want %d", name, len(parts), len(addons))
		}
		for _, d := range parts {
			var hr helmv2.HelmRelease
			if err := yaml.UnmarshalStrict([]byte(d), &hr); err != nil {
				t.Fatalf("%s: %v\n%s", name, err, d)
			}
			kc := hr.Spec.KubeConfig
			if hr.Namespace != name || kc == nil || kc.SecretRef == nil || kc.SecretRef.Name != name+"-admin-kubeconfig" || kc.SecretRef.Key != "super-admin.svc" {
				t.Fatalf("%s/%s: kubeConfig %+v", hr.Namespace, hr.Name, kc)
			}
			if hr.Spec.StorageNamespace != "cozy-"+hr.Name || !hr.Spec.Install.CreateNamespace {
				t.Fatalf("%s/%s: storage namespace %q, createNamespace %v", hr.Namespace, hr.Name, hr.Spec.StorageNamespace, hr.Spec.Install.CreateNamespace)
			}
			for _, dep := range hr.Spec.DependsOn {
				if !names[dep.Name] || dep.Namespace != "" {
					t.Fatalf("%s/%s depends on %+v", hr.Namespace, hr.Name, dep)
				}
			}
		}
	}
	docs := strings.Split(bootstrapObjects(ts, true, "http://git/platform", "u", "p", "oci://reg/packages/charts", []byte(`{"auths":{}}`)), "\n---\n")
	var gen struct {
		Spec struct{ Artifacts []struct{ Name string } }
	}
	if err := yaml.Unmarshal([]byte(docs[len(docs)-1]), &gen); err != nil {
		t.Fatal(err)
	}
	if len(gen.Spec.Artifacts) != 3+len(ts) || gen.Spec.Artifacts[1].Name != "addon-crds" || gen.Spec.Artifacts[2].Name != "addon" {
		t.Fatalf("generator outputs %+v", gen.Spec.Artifacts)
	}
	charts := chartsArtifact(true)
	for _, f := range []string{"addon/Chart.yaml", "addon/templates/uses.yaml", "addon-crds/templates/crd.yaml"} {
		if charts[f] == "" {
			t.Fatalf("the charts artifact has no %s", f)
		}
	}
}
