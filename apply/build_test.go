package apply

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/cozystack/cozy-aio/health"
)

func TestBuild(t *testing.T) {
	tests := []struct {
		dir     string
		opts    BuildOptions
		want    []string // Kind/namespace/name in order
		wantErr string
	}{
		{dir: "testdata/plain", want: []string{"ConfigMap/demo/app", "Namespace/demo"}},
		{dir: "testdata/withbase", want: []string{"Service/prod/web"}},
		{dir: "testdata/remote", wantErr: `kustomization.yaml: remote base "https://github.com/`},
		{dir: "testdata/badyaml", wantErr: "broken.yaml: document 1: invalid YAML"},
		{dir: "testdata/badkust", wantErr: "kustomize build of testdata/badkust"},
		{dir: "testdata/nonexistent", wantErr: "reading testdata/nonexistent"},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			objs, err := Build(context.Background(), tt.dir, tt.opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range objs {
				got = append(got, health.RefOf(o).String())
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestBuildDoesNotWriteTheDirectory(t *testing.T) {
	if _, err := Build(context.Background(), "testdata/plain", BuildOptions{}); err != nil {
		t.Fatal(err)
	}
	if hasKustomization(mustLoad(t, "testdata/plain"), "/") {
		t.Fatal("Build wrote a kustomization.yaml into the source directory")
	}
}

func mustLoad(t *testing.T, dir string) filesys.FileSystem {
	fs, err := loadDir(context.Background(), dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

func TestIsRemote(t *testing.T) {
	for ref, want := range map[string]bool{
		"base":                               false,
		"../common":                          false,
		"deploy.yaml":                        false,
		"github.com/org/repo//path?ref=v1":   true,
		"https://example.com/x.yaml":         true,
		"git@github.com:org/repo.git":        true,
		"ssh://git@example.com/org/repo.git": true,
		"gitlab.com/org/repo":                true,
	} {
		if got := isRemote(ref); got != want {
			t.Errorf("isRemote(%q) = %v, want %v", ref, got, want)
		}
	}
}
