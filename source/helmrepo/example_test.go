package helmrepo_test

import (
	"fmt"

	"github.com/cozystack/cozy-aio/source/helmrepo"
)

// Select picks a chart version from an index as Flux's HelmChart does:
// the newest version in the range, and when nothing matches, an error
// that lists the newest versions there are.
func ExampleSelect() {
	idx, err := helmrepo.ParseIndex([]byte(`apiVersion: v1
entries:
  podinfo:
  - {name: podinfo, version: 6.5.4, urls: [podinfo-6.5.4.tgz]}
  - {name: podinfo, version: 6.7.1, urls: [podinfo-6.7.1.tgz]}
  - {name: podinfo, version: 7.0.0-rc.1, urls: [podinfo-7.0.0-rc.1.tgz]}
`))
	if err != nil {
		panic(err)
	}
	cv, _ := helmrepo.Select(idx, "podinfo", "6.x")
	fmt.Println(cv.Version, cv.URLs[0])
	_, err = helmrepo.Select(idx, "podinfo", ">=8")
	fmt.Println(err)
	// Output:
	// 6.7.1 podinfo-6.7.1.tgz
	// chart "podinfo": no version matches ">=8" (newest available: 7.0.0-rc.1, 6.7.1, 6.5.4)
}
