package plan_test

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cozystack/cozy-aio/plan"
)

// An upgrade renames a StatefulSet; its pods keep their labels.
func ExampleCompute() {
	sts := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("apps/v1")
		u.SetKind("StatefulSet")
		u.SetNamespace("storage")
		u.SetName(name)
		_ = unstructured.SetNestedStringMap(u.Object, map[string]string{"app": "filer"}, "spec", "selector", "matchLabels")
		_ = unstructured.SetNestedStringMap(u.Object, map[string]string{"app": "filer"}, "spec", "template", "metadata", "labels")
		return u
	}
	p, err := plan.Compute(plan.Input{
		Current: []*unstructured.Unstructured{sts("seaweedfs-filer")},
		Desired: []*unstructured.Unstructured{sts("rel-seaweedfs-filer")},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, o := range p.Objects {
		fmt.Println(o.Action, o.Ref)
	}
	for _, r := range p.Risks {
		fmt.Println(r.Code, r.Object)
	}
	fmt.Println("exit code", p.ExitCode())
	// What `cozy-aio plan` will print, but for the hash of the last line.
	var text strings.Builder
	_ = p.WriteText(&text, false)
	lines := strings.Split(strings.TrimSpace(text.String()), "\n")
	fmt.Println(strings.Join(lines[:len(lines)-1], "\n"))
	fmt.Println(strings.HasPrefix(lines[len(lines)-1], "plan sha256:"))
	// Output:
	// create StatefulSet/storage/rel-seaweedfs-filer
	// delete StatefulSet/storage/seaweedfs-filer
	// DuplicateWorkload StatefulSet/storage/rel-seaweedfs-filer
	// exit code 2
	// + create StatefulSet/storage/rel-seaweedfs-filer
	// - delete StatefulSet/storage/seaweedfs-filer
	// risk DuplicateWorkload StatefulSet/storage/rel-seaweedfs-filer: StatefulSet/storage/rel-seaweedfs-filer is created while seaweedfs-filer goes, and seaweedfs-filer's selector picks its pods: both run side by side
	// true
}
