package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
)

// TestFlux210Corpus applies one manifest per field Flux 2.10's APIs add
// (testdata/flux210, see its README): every field is stored as written,
// and the engine handles the object or stalls it naming the field, never
// accepts it and ignores a field.
func TestFlux210Corpus(t *testing.T) {
	ctx := context.Background()
	files, err := filepath.Glob("testdata/flux210/*.yaml")
	if err != nil || len(files) < 10 {
		t.Fatalf("corpus: %d files (%v)", len(files), err)
	}
	startEngine(t, engine.Options{})
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".yaml"), func(t *testing.T) {
			ns := cp.Namespace(t)
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			docs := decodeAll(t, bytes.ReplaceAll(data, []byte("NAMESPACE"), []byte(ns)))
			obj := docs[0]
			expect := obj.GetAnnotations()["corpus.cozy-aio.io/expect"]
			if expect == "" {
				t.Fatal("the first document has no corpus.cozy-aio.io/expect annotation")
			}
			want := obj.DeepCopy()
			for _, d := range docs {
				if err := cp.Client.Create(ctx, d); err != nil {
					t.Fatalf("the API server refused %s %s: %v", d.GetKind(), d.GetName(), err)
				}
			}
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(want.GroupVersionKind())
			if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
				t.Fatal(err)
			}
			for _, miss := range missingFields(want.Object["spec"], got.Object["spec"], "spec") {
				t.Errorf("%s is not stored as written: the CRD schema drops or changes it", miss)
			}
			if k := want.GetKind(); k == "Alert" || k == "Provider" {
				return // no status: storage is all there is to check
			}
			var reason, message string
			deadline := time.Now().Add(30 * time.Second)
			for {
				if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
					t.Fatal(err)
				}
				if s, m := readyOf(got); s != "" {
					reason, message = readyReason(got), m
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no Ready condition after 30 s: status %v", got.Object["status"])
				}
				time.Sleep(100 * time.Millisecond)
			}
			switch field, stalls := strings.CutPrefix(expect, "stalled:"); {
			case stalls:
				if reason != engine.UnsupportedFieldReason || !strings.Contains(message, field) {
					t.Fatalf("Ready %s %q, want UnsupportedField naming %s", reason, message, field)
				}
			case reason == engine.UnsupportedFieldReason:
				t.Fatalf("stalled with %q; the corpus says the engine handles it", message)
			}
		})
	}
}

// decodeAll decodes the YAML documents of data.
func decodeAll(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	if len(out) == 0 {
		t.Fatal("no documents")
	}
	return out
}

// missingFields lists the leaves of want that got lacks or holds with
// another value.
func missingFields(want, got any, path string) []string {
	switch w := want.(type) {
	case map[string]any:
		g, _ := got.(map[string]any)
		var out []string
		for k, v := range w {
			out = append(out, missingFields(v, g[k], path+"."+k)...)
		}
		return out
	case []any:
		g, _ := got.([]any)
		if len(g) != len(w) {
			return []string{path}
		}
		var out []string
		for i := range w {
			out = append(out, missingFields(w[i], g[i], fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	default:
		if got == nil || fmt.Sprint(want) != fmt.Sprint(got) {
			return []string{path}
		}
		return nil
	}
}

// readyReason is the reason of u's Ready condition.
func readyReason(u *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
			r, _ := m["reason"].(string)
			return r
		}
	}
	return ""
}
