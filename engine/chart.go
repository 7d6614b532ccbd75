package engine

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"sigs.k8s.io/yaml"
)

// chartArchive returns a Helm chart archive for an artifact. Helm wants
// every file under one top directory, as `helm package` writes it; a chart
// copied to an artifact's root (as an ArtifactGenerator does with
// "@chart/demo/**" → "@artifact/") is re-packed under its chart name. The
// returned cleanup removes a re-packed copy.
func chartArchive(artifactPath string) (string, func(), error) {
	noop := func() {}
	rooted, name, err := chartAtRoot(artifactPath)
	if err != nil || !rooted {
		return artifactPath, noop, err
	}
	out, err := os.CreateTemp("", "cozy-chart-*.tgz")
	if err != nil {
		return "", noop, err
	}
	cleanup := func() { os.Remove(out.Name()) }
	if err := repack(artifactPath, out, name+"/"); err != nil {
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

// chartAtRoot reports whether the archive has Chart.yaml at its root, and
// the chart's name.
func chartAtRoot(p string) (bool, string, error) {
	f, err := os.Open(p)
	if err != nil {
		return false, "", err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return false, "", err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return false, "", nil
		}
		if err != nil {
			return false, "", err
		}
		if path.Clean(strings.TrimPrefix(h.Name, "./")) != "Chart.yaml" {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(tr, 1<<20))
		if err != nil {
			return false, "", err
		}
		var meta struct {
			Name string `json:"name"`
		}
		if err := yaml.Unmarshal(b, &meta); err != nil || meta.Name == "" {
			return false, "", fmt.Errorf("Chart.yaml has no valid name: %v", err)
		}
		return true, meta.Name, nil
	}
}

func repack(src string, dst io.Writer, prefix string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(dst)
	tw := tar.NewWriter(zw)
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		h.Name = prefix + strings.TrimPrefix(h.Name, "./")
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}
