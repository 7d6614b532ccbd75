package helmrepo_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"

	"github.com/cozystack/cozy-aio/source/helmrepo"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

var demo = map[string]string{
	"chart/Chart.yaml":        "apiVersion: v2\nname: demo\nversion: 1.0.0\n",
	"chart/values.yaml":       "color: blue\nsize: 1\n",
	"chart/templates/cm.yaml": "kind: ConfigMap\n",
	"chart/.helmignore":       "*.md\n",
	"chart/NOTES.md":          "ignored\n",
	"env/prod.yaml":           "color: red\n",
}

// TestPackageIsDeterministic packages the same files at different times
// and modification times: the archives are byte for byte the same, so a
// replica rebuilds the digest the leader recorded.
func TestPackageIsDeterministic(t *testing.T) {
	var archives [][]byte
	for i := range 2 {
		root := t.TempDir()
		writeFiles(t, root, demo)
		mt := time.Now().Add(time.Duration(i) * time.Hour)
		filepath.Walk(root, func(p string, _ os.FileInfo, _ error) error { return os.Chtimes(p, mt, mt) })
		p, err := helmrepo.Package(filepath.Join(root, "chart"), helmrepo.PackageOptions{
			VersionMetadata: "abcdef012345",
			Values:          helmrepo.ValuesOptions{Files: []string{"chart/values.yaml", "env/prod.yaml", "env/absent.yaml"}, IgnoreMissing: true},
			ValuesRoot:      root,
		})
		if err != nil {
			t.Fatal(err)
		}
		if p.Metadata.Version != "1.0.0+abcdef012345" || strings.Join(p.ValuesFiles, ",") != "chart/values.yaml,env/prod.yaml" {
			t.Fatalf("packaged %s with values files %v", p.Metadata.Version, p.ValuesFiles)
		}
		md, err := helmrepo.VerifyChart(p.Data, "demo", "1.0.0+abcdef012345")
		if err != nil || md.Name != "demo" {
			t.Fatal(md, err)
		}
		archives = append(archives, p.Data)
	}
	if !bytes.Equal(archives[0], archives[1]) {
		t.Fatal("packaging the same files twice gave different archives")
	}
}

func TestPackageBadInputs(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, demo)
	writeFiles(t, root, map[string]string{
		"deps/Chart.yaml": "apiVersion: v2\nname: umbrella\nversion: 1.0.0\ndependencies:\n- name: redis\n  version: 1.x\n  repository: https://charts.example.com\n",
	})
	for _, tc := range []struct {
		dir  string
		opts helmrepo.PackageOptions
		want error
		says string
	}{
		{"absent", helmrepo.PackageOptions{}, helmrepo.ErrInvalidChart, "no chart directory"},
		{"env", helmrepo.PackageOptions{}, helmrepo.ErrInvalidChart, "Chart.yaml"},
		{"chart", helmrepo.PackageOptions{Values: helmrepo.ValuesOptions{Files: []string{"nope.yaml"}}}, helmrepo.ErrValuesFileNotFound, "nope.yaml"},
		{"chart", helmrepo.PackageOptions{Values: helmrepo.ValuesOptions{Files: []string{"../../../etc/passwd"}}}, helmrepo.ErrValuesFileNotFound, "passwd"},
		{"deps", helmrepo.PackageOptions{}, helmrepo.ErrMissingDependency, "redis (1.x from https://charts.example.com)"},
		{"deps", helmrepo.PackageOptions{Dependencies: func(*chartv2.Dependency) ([]byte, error) { return []byte("junk"), nil }}, helmrepo.ErrInvalidChart, "dependency redis"},
	} {
		_, err := helmrepo.Package(filepath.Join(root, tc.dir), tc.opts)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want %v saying %q", tc.dir, err, tc.want, tc.says)
		}
	}
}

func TestRepackMergesValuesFilesOfTheChart(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, demo)
	writeFiles(t, root, map[string]string{"chart/values-prod.yaml": "color: green\nextra: {a: 1}\n"})
	p, err := helmrepo.Package(filepath.Join(root, "chart"), helmrepo.PackageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := helmrepo.Repack(p.Data, helmrepo.ValuesOptions{Files: []string{"values.yaml", "values-prod.yaml"}})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(out.Data, p.Data) || strings.Join(out.ValuesFiles, ",") != "values.yaml,values-prod.yaml" {
		t.Fatalf("repack: %v", out.ValuesFiles)
	}
	values := valuesOf(t, out.Data)
	for _, want := range []string{"color: green", "size: 1", "a: 1"} {
		if !strings.Contains(values, want) {
			t.Fatalf("merged values.yaml %q lacks %q", values, want)
		}
	}
}

// valuesOf returns the values.yaml of a chart archive, as Helm loads it.
func valuesOf(t *testing.T, data []byte) string {
	t.Helper()
	ch, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range ch.Raw {
		if f.Name == "values.yaml" {
			return string(f.Data)
		}
	}
	return ""
}
