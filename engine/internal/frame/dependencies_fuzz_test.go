package frame

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzParseDependsOn parses DependsOnAnnotation values. What parses names
// only kinds the engine reconciles, with a non-empty namespace and name and
// no separator inside a part; written back as Kind/namespace/name it parses
// to the same references; and the graph built from it finds cycles without
// panicking.
func FuzzParseDependsOn(f *testing.F) {
	f.Add("HelmRelease/cozy-system/cilium, Kustomization/platform ,", "tenant-a")
	f.Add("Kustomization/a,Kustomization/a", "ns")
	f.Add("GitRepository//x", "ns")
	f.Add("HelmRelease/x/y/z", "ns")
	f.Add(",,, ,", "")
	f.Add("OCIRepository/a\x00b", "ns")
	f.Fuzz(func(t *testing.T, value, namespace string) {
		// The namespace is the object's: always a DNS label (a "," there
		// would split the references written back).
		if len(validation.IsDNS1123Label(namespace)) > 0 {
			namespace = "ns"
		}
		refs, err := ParseDependsOn(value, namespace)
		if err != nil {
			if !strings.Contains(err.Error(), DependsOnAnnotation) {
				t.Fatalf("error does not name the annotation: %v", err)
			}
			return
		}
		self := Ref{Kind: "Kustomization", Namespace: namespace, Name: "self"}
		parts := make([]string, 0, len(refs))
		for _, r := range refs {
			if !dependable(r.Kind) || r.Namespace == "" || r.Name == "" {
				t.Fatalf("parsed %+v from %q", r, value)
			}
			if strings.Contains(r.Namespace, "/") || strings.Contains(r.Name, "/") {
				t.Fatalf("a part holds the separator: %+v", r)
			}
			parts = append(parts, r.Kind+"/"+r.Namespace+"/"+r.Name)
		}
		// Parts carry no "," (the item separator), so the references written
		// back parse to the same; inner spaces of a part are kept.
		again, err := ParseDependsOn(strings.Join(parts, ","), "other")
		if err != nil || len(again) != len(refs) {
			t.Fatalf("%q parsed to %v, written back it parses to %v, %v", value, refs, again, err)
		}
		for i := range refs {
			if again[i] != refs[i] {
				t.Fatalf("reference %d: %+v became %+v", i, refs[i], again[i])
			}
		}
		g := NewGraph()
		g.Set(self, refs)
		for _, r := range refs {
			g.Set(r, []Ref{self})
		}
		if len(refs) > 0 && g.Cycle(self) == nil {
			t.Fatalf("no cycle found through %v and back", refs)
		}
		obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: "self", Annotations: map[string]string{DependsOnAnnotation: value},
		}}
		if _, err := Dependencies("Kustomization", obj, nil); err != nil {
			t.Fatalf("dependencies failed where parseDependsOn did not: %v", err)
		}
	})
}
