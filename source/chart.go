package source

import (
	"archive/tar"
	// compress/gzip, not klauspost's: Helm's release records carry the
	// digest of a re-packed chart, which must stay the bytes earlier
	// versions wrote.
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"sigs.k8s.io/yaml"
)

// maxChartYAML bounds the Chart.yaml ChartName reads.
const maxChartYAML = 1 << 20

// ChartName reads the tar.gz archive r and returns the name in the
// Chart.yaml at its root, or "" when the archive has no Chart.yaml there.
// A chart packaged by `helm package` has its Chart.yaml under a directory
// named for the chart; one copied to an artifact's root (as an
// ArtifactGenerator does with "@chart/demo/**" → "@artifact/") has it at
// the root, and Helm loads it only once Repack has moved it under its name.
func ChartName(r io.Reader) (string, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return "", err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		if path.Clean(strings.TrimPrefix(h.Name, "./")) != "Chart.yaml" {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(tr, maxChartYAML))
		if err != nil {
			return "", err
		}
		var meta struct {
			Name string `json:"name"`
		}
		if err := yaml.Unmarshal(b, &meta); err != nil || meta.Name == "" {
			return "", fmt.Errorf("Chart.yaml has no valid name: %v", err)
		}
		return meta.Name, nil
	}
}

// Repack copies the tar.gz archive src to dst with every entry moved under
// prefix ("demo/"); a leading "./" of an entry name is dropped. Headers
// and contents are otherwise copied as they are.
func Repack(dst io.Writer, src io.Reader, prefix string) error {
	gz, err := gzip.NewReader(src)
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
