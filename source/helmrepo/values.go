package helmrepo

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"sigs.k8s.io/yaml"
)

// ErrValuesFileNotFound means a values file named in ValuesOptions does
// not exist.
var ErrValuesFileNotFound = errors.New("values file not found")

// ValuesOptions replaces a chart's default values with values files
// merged in order, later files winning (Flux's HelmChart spec.valuesFiles;
// the chart's own values.yaml counts only when listed). The zero value,
// or files that are all missing and ignored, keep the chart's values.
type ValuesOptions struct {
	// Files are slash-separated paths of values files. Default: none.
	Files []string
	// IgnoreMissing skips files that do not exist instead of failing.
	// Default: a missing file fails.
	IgnoreMissing bool
}

// Packaged is a chart archive built by Package or Repack.
type Packaged struct {
	// Metadata is the chart's Chart.yaml, with the version it was
	// packaged with.
	Metadata *chartv2.Metadata
	// Data is the .tgz archive.
	Data []byte
	// ValuesFiles are the values files merged, in order.
	ValuesFiles []string
}

// mergeValues reads the values files with read and merges them in order.
func mergeValues(opts ValuesOptions, read func(name string) ([]byte, bool, error)) (map[string]any, []string, error) {
	merged := map[string]any{}
	var used []string
	for _, name := range opts.Files {
		b, ok, err := read(name)
		if err != nil {
			return nil, nil, fmt.Errorf("values file %q: %w", name, err)
		}
		if !ok {
			if opts.IgnoreMissing {
				continue
			}
			return nil, nil, fmt.Errorf("%w: %q", ErrValuesFileNotFound, name)
		}
		v, err := loader.LoadValues(bytes.NewReader(b))
		if err != nil {
			return nil, nil, fmt.Errorf("values file %q: %w", name, err)
		}
		merged = loader.MergeMaps(merged, v)
		used = append(used, name)
	}
	return merged, used, nil
}

// overrideValues makes values the chart's default values (values.yaml).
func overrideValues(ch *chartv2.Chart, values map[string]any) error {
	b, err := yaml.Marshal(values)
	if err != nil {
		return err
	}
	for _, f := range ch.Raw {
		if f.Name == chartutil.ValuesfileName {
			f.Data = b
			ch.Values = values
			return nil
		}
	}
	ch.Raw = append(ch.Raw, rawFile(chartutil.ValuesfileName, b))
	ch.Values = values
	return nil
}

// readUnder reads a slash-separated path below root; ok is false when it
// does not exist. The path cannot climb out of root.
func readUnder(root string) func(name string) ([]byte, bool, error) {
	return func(name string) ([]byte, bool, error) {
		p := filepath.Join(root, filepath.FromSlash(path.Clean("/"+name)))
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, false, nil
		}
		return b, err == nil, err
	}
}

// readRaw reads a file of a loaded chart by its path in the chart.
func readRaw(ch *chartv2.Chart) func(name string) ([]byte, bool, error) {
	return func(name string) ([]byte, bool, error) {
		clean := path.Clean("/" + name)[1:]
		for _, f := range ch.Raw {
			if f.Name == clean {
				return f.Data, true, nil
			}
		}
		return nil, false, nil
	}
}
