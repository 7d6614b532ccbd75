package apply

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// outsideMarker is in a file beside the build root, which no build may read.
const outsideMarker = "outside-the-root-7c1f"

// refusingTransport fails every request, counting it: a build with remote
// bases off must not reach the network.
type refusingTransport struct{ calls atomic.Int64 }

func (r *refusingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r.calls.Add(1)
	return nil, http.ErrUseLastResponse
}

// FuzzBuild builds a kustomization as Build does, from a fuzzed
// kustomization.yaml, one fuzzed resource file beside it and a fuzzed base
// kustomization in a sibling directory under the same root. A file outside
// the root holds a marker; no rendered object may carry it, no build may
// make an HTTP request or run git (remote bases are off), and nothing may
// panic.
func FuzzBuild(f *testing.F) {
	f.Add("resources:\n- cm.yaml\n- ../base\n", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n", "resources: [cm.yaml]\n")
	f.Add("resources:\n- ../../outside.yaml\n", "", "")
	f.Add("resources:\n- /outside.yaml\n- ../base\nnamePrefix: p-\ncommonLabels: {a: b}\n", "kind: List\napiVersion: v1\nitems: []\n", "resources: [../../outside.yaml]\n")
	f.Add("resources:\n- https://example.com/x.yaml\n", "", "resources: [github.com/org/repo//dir?ref=v1]\n")
	f.Add("configMapGenerator:\n- name: g\n  files: [../../outside.yaml]\n", "", "")
	f.Add("patches:\n- path: cm.yaml\n  target: {kind: ConfigMap}\nresources: [../base]\n", "- op: add\n  path: /data\n  value: {x: y}\n", "resources: [cm.yaml]\n")
	f.Add("components: [../base]\n", "", "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources: [cm.yaml]\n")
	f.Add("", "apiVersion: v1\nkind: Namespace\nmetadata: {name: n}\n---\n{}\n", "")
	transport := &refusingTransport{}
	http.DefaultTransport = transport
	// git, if anything ran it, would be this script, which leaves a mark.
	bin := f.TempDir()
	gitMark := filepath.Join(bin, "git-ran")
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte("#!/bin/sh\ntouch "+gitMark+"\nexit 1\n"), 0o755); err != nil {
		f.Fatal(err)
	}
	f.Setenv("PATH", bin)
	f.Fuzz(func(t *testing.T, kustomization, resource, base string) {
		top := t.TempDir()
		root := filepath.Join(top, "root")
		app := filepath.Join(root, "app")
		write := func(p, data string) {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		outside := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + outsideMarker + "\ndata:\n  k: " + outsideMarker + "\n"
		write(filepath.Join(top, "outside.yaml"), outside)
		write(filepath.Join(root, "outside.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: inside\n")
		if kustomization != "" {
			write(filepath.Join(app, "kustomization.yaml"), kustomization)
		}
		write(filepath.Join(app, "cm.yaml"), resource)
		write(filepath.Join(root, "base", "kustomization.yaml"), base)
		write(filepath.Join(root, "base", "cm.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: base\n")
		before := transport.calls.Load()
		objs, err := Build(context.Background(), app, BuildOptions{Root: root, MaxBytes: 1 << 20})
		if n := transport.calls.Load() - before; n > 0 {
			t.Fatalf("the build made %d HTTP requests with remote bases off", n)
		}
		if _, statErr := os.Stat(gitMark); statErr == nil {
			t.Fatal("the build ran git with remote bases off")
		}
		if err != nil {
			return
		}
		for _, o := range objs {
			b, err := json.Marshal(o.Object)
			if err != nil {
				t.Fatalf("rendered object does not marshal: %v", err)
			}
			if strings.Contains(string(b), outsideMarker) {
				t.Fatalf("the build read a file outside its root: %s", b)
			}
		}
	})
}
