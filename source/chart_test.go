package source_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/cozystack/cozy-aio/source"
)

func TestChartName(t *testing.T) {
	cases := []struct {
		name    string
		entries []entry
		want    string
		wantErr bool
	}{
		{"at the root", []entry{{name: "values.yaml"}, {name: "Chart.yaml", body: "name: demo\nversion: 0.1.0\n"}}, "demo", false},
		{"at the root with ./", []entry{{name: "./Chart.yaml", body: "name: demo\n"}}, "demo", false},
		{"packaged by helm", []entry{{name: "demo/Chart.yaml", body: "name: demo\n"}}, "", false},
		{"no chart", []entry{{name: "deploy.yaml", body: "kind: ConfigMap\n"}}, "", false},
		{"no name", []entry{{name: "Chart.yaml", body: "version: 0.1.0\n"}}, "", true},
		{"not YAML", []entry{{name: "Chart.yaml", body: "name: [\n"}}, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := source.ChartName(bytes.NewReader(mkTar(t, true, tc.entries...)))
			if got != tc.want || (err != nil) != tc.wantErr {
				t.Fatalf("got %q, %v; want %q, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
	if _, err := source.ChartName(strings.NewReader("not gzip")); err == nil {
		t.Fatal("a non-gzip archive gave no error")
	}
}

func TestRepack(t *testing.T) {
	in := mkTar(t, true, entry{name: "./Chart.yaml", body: "name: demo\n"}, entry{name: "templates/cm.yaml", body: "kind: ConfigMap\n"})
	var out bytes.Buffer
	if err := source.Repack(&out, bytes.NewReader(in), "demo/"); err != nil {
		t.Fatal(err)
	}
	got := tarEntries(t, out.Bytes())
	want := []string{"demo/Chart.yaml=name: demo\n", "demo/templates/cm.yaml=kind: ConfigMap\n"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("entries %q, want %q", got, want)
	}
	// The same input gives the same bytes: the digest of a re-packed chart
	// is recorded on its releases.
	var again bytes.Buffer
	if err := source.Repack(&again, bytes.NewReader(in), "demo/"); err != nil || !bytes.Equal(again.Bytes(), out.Bytes()) {
		t.Fatalf("a second Repack differs (%v)", err)
	}
	if err := source.Repack(io.Discard, strings.NewReader("not gzip"), "demo/"); err == nil {
		t.Fatal("a non-gzip archive gave no error")
	}
}

// tarEntries lists a tar.gz archive as name=content.
func tarEntries(t testing.TB, b []byte) []string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var out []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		out = append(out, h.Name+"="+string(body))
	}
}

func ExampleRepack() {
	// A chart copied to an artifact's root, as an ArtifactGenerator writes it.
	var artifact bytes.Buffer
	zw := gzip.NewWriter(&artifact)
	tw := tar.NewWriter(zw)
	body := "apiVersion: v2\nname: demo\nversion: 0.1.0\n"
	_ = tw.WriteHeader(&tar.Header{Name: "Chart.yaml", Mode: 0o644, Size: int64(len(body))})
	_, _ = tw.Write([]byte(body))
	_ = tw.Close()
	_ = zw.Close()

	name, _ := source.ChartName(bytes.NewReader(artifact.Bytes()))
	var chart bytes.Buffer
	_ = source.Repack(&chart, bytes.NewReader(artifact.Bytes()), name+"/")

	zr, _ := gzip.NewReader(&chart)
	h, _ := tar.NewReader(zr).Next()
	fmt.Println(name, h.Name)
	// Output:
	// demo demo/Chart.yaml
}
