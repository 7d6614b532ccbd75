package demo

import (
	"strings"
	"testing"

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
	docs := strings.Split(bootstrapObjects(ts, "http://git/platform", "u", "p", "oci://reg/packages/charts", []byte(`{"auths":{}}`)), "\n---\n")
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
	for path, doc := range platformRepo(ts) {
		for _, d := range strings.Split(doc, "\n---\n") {
			var o map[string]any
			if err := yaml.Unmarshal([]byte(d), &o); err != nil {
				t.Fatalf("%s does not parse: %v", path, err)
			}
		}
	}
}
