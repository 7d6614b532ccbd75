package helm

import (
	"reflect"
	"sync"
	"testing"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
)

// dependentChart is a chart whose subchart an alias and a condition turn
// off: Helm's dependency processing rewrites the parent's metadata,
// dependency list and values when it runs on it.
func dependentChart() *chartv2.Chart {
	sub := &chartv2.Chart{
		Metadata: &chartv2.Metadata{APIVersion: "v2", Name: "sub", Version: "1.0.0"},
		Values:   map[string]any{"replicas": 1},
	}
	parent := &chartv2.Chart{
		Metadata: &chartv2.Metadata{
			APIVersion: "v2", Name: "parent", Version: "1.0.0",
			Dependencies: []*chartv2.Dependency{{Name: "sub", Version: "1.0.0", Alias: "db", Condition: "db.enabled", Tags: []string{"back"}}},
			Maintainers:  []*chartv2.Maintainer{{Name: "a"}},
		},
		Lock:   &chartv2.Lock{Dependencies: []*chartv2.Dependency{{Name: "sub", Version: "1.0.0"}}},
		Values: map[string]any{"db": map[string]any{"enabled": true, "list": []any{"x"}}},
	}
	parent.SetDependencies(sub)
	return parent
}

func TestCopyChartKeepsTheCachedChartIntact(t *testing.T) {
	orig := dependentChart()
	want := dependentChart()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			c := copyChart(orig)
			// Every other copy disables the subchart; Helm then drops it,
			// renames the dependency to its alias and rewrites the values.
			vals := map[string]any{"db": map[string]any{"enabled": i%2 == 0}}
			if err := chartutil.ProcessDependencies(c, vals); err != nil {
				t.Error(err)
			}
			c.Values["db"].(map[string]any)["list"] = append(c.Values["db"].(map[string]any)["list"].([]any), "y")
			c.Metadata.Maintainers[0].Name = "b"
			if i%2 == 1 && len(c.Dependencies()) != 0 {
				t.Errorf("copy %d: disabled subchart kept", i)
			}
		})
	}
	wg.Wait()
	if !reflect.DeepEqual(orig.Metadata, want.Metadata) || !reflect.DeepEqual(orig.Lock, want.Lock) || !reflect.DeepEqual(orig.Values, want.Values) {
		t.Fatalf("the cached chart changed:\nmetadata %+v\nvalues %v", orig.Metadata.Dependencies[0], orig.Values)
	}
	if len(orig.Dependencies()) != 1 || orig.Dependencies()[0].Parent() != orig {
		t.Fatalf("the cached chart's dependency tree changed: %d dependencies", len(orig.Dependencies()))
	}
	c := copyChart(orig)
	if c.Dependencies()[0].Parent() != c {
		t.Fatal("a copy's subchart points to another parent")
	}
	if c.Values == nil || copyChart(&chartv2.Chart{Metadata: orig.Metadata}).Values != nil {
		t.Fatal("copyChart must keep nil values nil and others non-nil")
	}
}
