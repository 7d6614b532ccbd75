// Package crds embeds the CustomResourceDefinitions of the Flux kinds that
// cozy-aio reconciles. They are generated from the upstream Go API types
// with controller-gen (go generate), so they match what Flux installs.
package crds

//go:generate sh -c "cd ../../hack/tools && go tool controller-gen crd:crdVersions=v1 paths=github.com/fluxcd/source-controller/api/v1 paths=github.com/fluxcd/kustomize-controller/api/v1 paths=github.com/fluxcd/helm-controller/api/v2 paths=github.com/fluxcd/source-watcher/api/v2/v1beta1 paths=github.com/fluxcd/notification-controller/api/v1 paths=github.com/fluxcd/notification-controller/api/v1beta3 output:crd:dir=$PWD"

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed *.yaml
var files embed.FS

// All returns the embedded CRDs, sorted by name.
func All() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return load(files, "embedded CRD")
}

// Load decodes the CRDs of the *.yaml files at the root of fsys, one per
// file, sorted by file name. Decoding is strict: a field the
// CustomResourceDefinition type does not have is an error that names the
// file.
func Load(fsys fs.FS) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return load(fsys, "CRD")
}

// load is Load; what names the files in errors.
func load(fsys fs.FS, what string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	names, err := fs.Glob(fsys, "*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(names))
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(b, crd); err != nil {
			return nil, fmt.Errorf("%s %s: %w", what, n, err)
		}
		out = append(out, crd)
	}
	return out, nil
}
