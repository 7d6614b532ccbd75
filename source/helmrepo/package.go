package helmrepo

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
)

// ErrMissingDependency means a chart declares a dependency that its
// charts/ directory does not hold.
var ErrMissingDependency = errors.New("dependency not in charts/")

// packageModTime stamps every file of a packaged chart, so that packaging
// the same files gives the same bytes on every replica and every run.
var packageModTime = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// PackageOptions configures Package. The zero value packages the chart
// as it is.
type PackageOptions struct {
	// VersionMetadata, when set, is appended to the version as SemVer
	// build metadata ("1.0.0+<meta>", or "1.0.0+a.<meta>" when it has
	// some), as Flux's Revision strategy does. Default: none.
	VersionMetadata string
	// Values replaces the default values. Default: the chart's.
	Values ValuesOptions
	// ValuesRoot is the directory the values file paths are relative
	// to, as Flux reads them from the source's root. Default: the chart
	// directory.
	ValuesRoot string
	// Dependencies resolves a dependency that charts/ does not hold.
	// Default: such a dependency fails the packaging
	// (ErrMissingDependency).
	Dependencies DependencyResolver
}

// DependencyResolver returns the archive of a chart dependency that a
// chart declares but does not vendor.
type DependencyResolver func(dep *chartv2.Dependency) ([]byte, error)

// Package packages the chart in dir as `helm package` does (Helm's loader
// honours .helmignore; Helm's writer packs it), with every file stamped
// with one fixed time so that the archive depends on the files only.
func Package(dir string, opts PackageOptions) (Packaged, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Packaged{}, fmt.Errorf("%w: no chart directory", ErrInvalidChart)
		}
		return Packaged{}, err
	}
	if !fi.IsDir() {
		return Packaged{}, fmt.Errorf("%w: not a directory", ErrInvalidChart)
	}
	ch, err := loader.LoadDir(dir)
	if err != nil {
		return Packaged{}, fmt.Errorf("%w: %w", ErrInvalidChart, err)
	}
	if err := resolveDependencies(ch, opts.Dependencies); err != nil {
		return Packaged{}, err
	}
	if opts.VersionMetadata != "" {
		sep := "+"
		if strings.Contains(ch.Metadata.Version, "+") {
			sep = "."
		}
		ch.Metadata.Version += sep + opts.VersionMetadata
	}
	root := opts.ValuesRoot
	if root == "" {
		root = dir
	}
	return save(ch, opts.Values, readUnder(root))
}

// Repack replaces the default values of a chart archive with opts (the
// paths are files of the chart) and packages it again as Package does.
func Repack(data []byte, opts ValuesOptions) (Packaged, error) {
	ch, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return Packaged{}, fmt.Errorf("%w: %w", ErrInvalidChart, err)
	}
	return save(ch, opts, readRaw(ch))
}

func save(ch *chartv2.Chart, values ValuesOptions, read func(string) ([]byte, bool, error)) (Packaged, error) {
	var used []string
	if len(values.Files) > 0 {
		merged, u, err := mergeValues(values, read)
		if err != nil {
			return Packaged{}, err
		}
		if len(u) > 0 {
			if err := overrideValues(ch, merged); err != nil {
				return Packaged{}, err
			}
		}
		used = u
	}
	ch.StampModTimes(packageModTime)
	out, err := os.MkdirTemp("", "cozy-package-")
	if err != nil {
		return Packaged{}, err
	}
	defer os.RemoveAll(out)
	p, err := chartutil.Save(ch, out)
	if err != nil {
		return Packaged{}, fmt.Errorf("packaging: %w", err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return Packaged{}, err
	}
	return Packaged{Metadata: ch.Metadata, Data: b, ValuesFiles: used}, nil
}

// resolveDependencies adds the declared dependencies that charts/ lacks,
// from resolve.
func resolveDependencies(ch *chartv2.Chart, resolve DependencyResolver) error {
	have := map[string]bool{}
	for _, d := range ch.Dependencies() {
		have[d.Name()] = true
	}
	var missing []string
	for _, d := range ch.Metadata.Dependencies {
		if have[d.Name] {
			continue
		}
		if resolve == nil {
			missing = append(missing, fmt.Sprintf("%s (%s from %s)", d.Name, d.Version, d.Repository))
			continue
		}
		b, err := resolve(d)
		if err != nil {
			return fmt.Errorf("dependency %s (%s from %s): %w", d.Name, d.Version, d.Repository, err)
		}
		sub, err := loader.LoadArchive(bytes.NewReader(b))
		if err != nil {
			return fmt.Errorf("dependency %s: %w: %w", d.Name, ErrInvalidChart, err)
		}
		if sub.Name() != d.Name {
			return fmt.Errorf("dependency %s: %w: Chart.yaml names chart %q", d.Name, ErrInvalidChart, sub.Name())
		}
		ch.AddDependency(sub)
		have[d.Name] = true
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s; vendor it with `helm dependency build` or name its repository in a HelmRepository", ErrMissingDependency, strings.Join(missing, ", "))
	}
	return nil
}

func rawFile(name string, data []byte) *common.File {
	return &common.File{Name: name, ModTime: packageModTime, Data: data}
}
