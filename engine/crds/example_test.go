package crds_test

import (
	"fmt"
	"testing/fstest"

	"github.com/cozystack/cozy-aio/engine/crds"
)

// Load reads CRDs kept beside a test or a program, such as those of an
// older Flux release, the way All reads the embedded ones.
func ExampleLoad() {
	fsys := fstest.MapFS{
		"example.com_widgets.yaml": {Data: []byte(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
  - {name: v1, served: true, storage: true}
`)},
		"example.com_gadgets.yaml": {Data: []byte("metadata: {name: gadgets.example.com}\nspec: {colour: blue}\n")},
	}
	_, err := crds.Load(fsys)
	fmt.Println(err)
	delete(fsys, "example.com_gadgets.yaml")
	all, err := crds.Load(fsys)
	if err != nil {
		panic(err)
	}
	fmt.Println(all[0].Name, all[0].Spec.Versions[0].Name)
	// Output:
	// CRD example.com_gadgets.yaml: error unmarshaling JSON: while decoding JSON: json: unknown field "colour"
	// widgets.example.com v1
}
