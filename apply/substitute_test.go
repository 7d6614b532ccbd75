package apply

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/envsubst"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// substVars are the variables of the operator table.
var substVars = map[string]string{"name": "Hello-World", "path": "a/b/a/b", "empty": "", "n": "3"}

// substExprs covers every operator of fluxcd/pkg/envsubst, the escape,
// and text that is not a variable.
var substExprs = []string{
	"${name}", "${#name}", "${name^}", "${name^^}", "${name,}", "${name,,}",
	"${name:2}", "${name:2:3}", "${path#*/}", "${path##*/}", "${path%/*}", "${path%%/*}",
	"${unset-dflt}", "${empty-dflt}", "${unset:-dflt}", "${empty:-dflt}",
	"${unset=dflt}", "${unset:=dflt}", "${empty:=dflt}", "${name:=dflt}",
	"${path/a/x}", "${path//a/x}", "${path/#a/x}", "${path/%b/x}",
	"$${name}", "$${name} and ${name}", "${unset}", "$name", "plain text", "100%", "${n}-${n}",
}

// TestSubstituteMatchesEnvsubst runs every operator through both of our
// paths (Substitute, and Build with BuildOptions.Substitute) and through
// fluxcd/pkg/envsubst directly, as kustomize-controller calls it, and
// expects the same text.
func TestSubstituteMatchesEnvsubst(t *testing.T) {
	for _, expr := range substExprs {
		doc := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  v: 'x-" + expr + "'\n"
		want, wantErr := envsubst.Eval("x-"+expr, func(s string) (string, bool) { return substVars[s], true })
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "cm.yaml"), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		built, err := Build(context.Background(), dir, BuildOptions{Substitute: &SubstituteOptions{Vars: substVars}})
		plain, perr := Build(context.Background(), dir, BuildOptions{})
		if perr != nil {
			t.Fatal(perr)
		}
		substituted, serr := Substitute(plain, SubstituteOptions{Vars: substVars})
		if wantErr != nil {
			if err == nil || serr == nil || !strings.Contains(err.Error(), "ConfigMap/c") {
				t.Errorf("%q: envsubst fails (%v); Build: %v, Substitute: %v", expr, wantErr, err, serr)
			}
			continue
		}
		if err != nil || serr != nil {
			t.Errorf("%q: Build: %v, Substitute: %v", expr, err, serr)
			continue
		}
		for path, objs := range map[string][]*unstructured.Unstructured{"Build": built, "Substitute": substituted} {
			got, _, _ := unstructured.NestedString(objs[0].Object, "data", "v")
			if got != want {
				t.Errorf("%s: %q = %q, envsubst gives %q", path, expr, got, want)
			}
		}
	}
}

const substYAML = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: ${app}
  namespace: demo
spec:
  replicas: ${replicas:=1}
  paused: ${paused:=false}
  template:
    metadata:
      annotations:
        port: "${port}"
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: script
  namespace: demo
  annotations:
    kustomize.toolkit.fluxcd.io/substitute: disabled
data:
  run.sh: echo ${HOME}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: labelled
  namespace: demo
  labels:
    kustomize.toolkit.fluxcd.io/substitute: disabled
data:
  run.sh: echo ${HOME}
`

func TestSubstitute(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "all.yaml"), []byte(substYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"app": "web", "replicas": "3", "port": "8080"}
	out, err := Build(context.Background(), dir, BuildOptions{Substitute: &SubstituteOptions{Vars: vars}})
	if err != nil {
		t.Fatal(err)
	}
	if out[0].GetName() != "web" {
		t.Errorf("name = %q", out[0].GetName())
	}
	if r := fmt.Sprintf("%T %v", out[0].Object["spec"].(map[string]any)["replicas"], out[0].Object["spec"].(map[string]any)["replicas"]); r != "int 3" {
		t.Errorf("replicas = %s, want the number 3", r)
	}
	if p, ok, _ := unstructured.NestedBool(out[0].Object, "spec", "paused"); !ok || p {
		t.Errorf("paused = %v %v, want false", p, ok)
	}
	// Flux substitutes the YAML kustomize renders, which no longer quotes
	// "${port}": the value becomes the number 8080, in Flux as here.
	if p, _, _ := unstructured.NestedFieldNoCopy(out[0].Object, "spec", "template", "metadata", "annotations", "port"); fmt.Sprint(p) != "8080" {
		t.Errorf("port = %#v, want 8080", p)
	}
	for _, o := range out[1:] {
		if got := o.Object["data"].(map[string]any)["run.sh"]; got != "echo ${HOME}" {
			t.Errorf("%s opted out but was substituted: %q", o.GetName(), got)
		}
	}

	_, err = Build(context.Background(), dir, BuildOptions{Substitute: &SubstituteOptions{Strict: true, Vars: map[string]string{"replicas": "3"}}})
	var se *SubstituteError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "Deployment/demo/${app}") || !strings.Contains(err.Error(), `"app"`) {
		t.Fatalf("strict error = %v", err)
	}
}

func TestSubstituteStrategy(t *testing.T) {
	objs, _ := ReadObjects(strings.NewReader("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  k: ${v:=dflt}\n"), "inline")
	out, err := Substitute(objs, SubstituteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := out[0].Object["data"].(map[string]any)["k"]; got != "${v:=dflt}" {
		t.Errorf("without variables (WithVariables) k = %q, want it untouched", got)
	}
	out, err = Substitute(objs, SubstituteOptions{Always: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := out[0].Object["data"].(map[string]any)["k"]; got != "dflt" {
		t.Errorf("Always: k = %q, want dflt", got)
	}
	if objs[0].Object["data"].(map[string]any)["k"] != "${v:=dflt}" {
		t.Error("Substitute modified its input")
	}
}

func TestSubstituteBadInputNamesTheObject(t *testing.T) {
	objs, _ := ReadObjects(strings.NewReader("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  k: ${v}\n  j: ${bad\n"), "inline")
	for name, vars := range map[string]map[string]string{
		"invalid YAML after substitution": {"v": "a: b: c"},
		"invalid variable name":           {"v": "1", "not-valid": "x"},
	} {
		_, err := Substitute(objs[:1], SubstituteOptions{Vars: vars})
		if name == "invalid variable name" && (err == nil || !strings.Contains(err.Error(), "not-valid")) {
			t.Errorf("%s: error = %v", name, err)
		}
		if err == nil || !strings.Contains(err.Error(), "ConfigMap/x") {
			t.Errorf("%s: error = %v", name, err)
		}
	}
}

// FuzzExpand feeds arbitrary text through Substitute: it must never panic,
// and where it succeeds it must agree with fluxcd/pkg/envsubst.
func FuzzExpand(f *testing.F) {
	for _, s := range append(substExprs, "${", "}${x:-}", "$$${a}", "${a:=${b}}", "${a:-1:2}") {
		f.Add(s)
	}
	vars := map[string]string{"a": "1", "b": "2"}
	f.Fuzz(func(t *testing.T, s string) {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "x"},
			"data":     map[string]any{"k": s},
		}}
		out, err := Substitute([]*unstructured.Unstructured{obj}, SubstituteOptions{Vars: vars})
		if err != nil {
			return
		}
		if out[0].GetName() != "x" && !strings.Contains(s, "\n") {
			t.Fatalf("the name changed: %q", out[0].GetName())
		}
	})
}
