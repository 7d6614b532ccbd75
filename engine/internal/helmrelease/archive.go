package helmrelease

import (
	"fmt"
	"os"

	"github.com/cozystack/cozy-aio/source"
)

// chartArchive returns a Helm chart archive for an artifact: the artifact
// itself, or, for a chart copied to the artifact's root, a temporary copy
// re-packed under the chart's name (see source.ChartName). The returned
// cleanup removes the copy.
func chartArchive(artifactPath string) (string, func(), error) {
	noop := func() {}
	name, err := chartName(artifactPath)
	if err != nil || name == "" {
		return artifactPath, noop, err
	}
	out, err := os.CreateTemp("", "cozy-chart-*.tgz")
	if err != nil {
		return "", noop, err
	}
	cleanup := func() { os.Remove(out.Name()) }
	if err := repack(out, artifactPath, name+"/"); err != nil {
		out.Close()
		cleanup()
		return "", noop, fmt.Errorf("re-packing chart %s: %w", name, err)
	}
	if err := out.Close(); err != nil {
		cleanup()
		return "", noop, err
	}
	return out.Name(), cleanup, nil
}

func chartName(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return source.ChartName(f)
}

func repack(dst *os.File, src, prefix string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	return source.Repack(dst, f, prefix)
}
