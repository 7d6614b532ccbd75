package helmrepo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

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

// Package packages the chart in dir as `helm package` does (Helm's loader
// honours .helmignore; Helm's writer packs it), with every file stamped
// with one fixed time so that the archive depends on the files only.
// versionMetadata, when set, is appended to the version as SemVer build
// metadata ("1.0.0+<meta>", or "1.0.0+a.<meta>" when it has some), as
// Flux's Revision strategy does. Every dependency the chart declares must
// be vendored in charts/.
func Package(dir, versionMetadata string) (*chartv2.Metadata, []byte, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, fmt.Errorf("%w: no chart directory", ErrInvalidChart)
		}
		return nil, nil, err
	}
	if !fi.IsDir() {
		return nil, nil, fmt.Errorf("%w: not a directory", ErrInvalidChart)
	}
	ch, err := loader.LoadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrInvalidChart, err)
	}
	if err := checkDependencies(ch); err != nil {
		return nil, nil, err
	}
	if versionMetadata != "" {
		sep := "+"
		if strings.Contains(ch.Metadata.Version, "+") {
			sep = "."
		}
		ch.Metadata.Version += sep + versionMetadata
	}
	ch.StampModTimes(packageModTime)
	out, err := os.MkdirTemp("", "cozy-package-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(out)
	p, err := chartutil.Save(ch, out)
	if err != nil {
		return nil, nil, fmt.Errorf("packaging: %w", err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, nil, err
	}
	return ch.Metadata, b, nil
}

// checkDependencies fails for a declared dependency that charts/ lacks.
func checkDependencies(ch *chartv2.Chart) error {
	have := map[string]bool{}
	for _, d := range ch.Dependencies() {
		have[d.Name()] = true
	}
	var missing []string
	for _, d := range ch.Metadata.Dependencies {
		if !have[d.Name] {
			missing = append(missing, fmt.Sprintf("%s (%s from %s)", d.Name, d.Version, d.Repository))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s; vendor it with `helm dependency build`", ErrMissingDependency, strings.Join(missing, ", "))
	}
	return nil
}
