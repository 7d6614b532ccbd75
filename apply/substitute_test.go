package apply

import (
	"errors"
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"name": "web", "replicas": "3", "empty": ""}
	tests := []struct {
		in, want string
		missing  []string
	}{
		{in: "no vars", want: "no vars"},
		{in: "${name}", want: "web"},
		{in: "a-${name}-b-${replicas}", want: "a-web-b-3"},
		{in: "${unset:=dflt}", want: "dflt"},
		{in: "${name:=dflt}", want: "web"},
		{in: "${empty:=dflt}", want: "dflt"},
		{in: "${unset:-dflt}", want: "dflt"},
		{in: "${unset:=}", want: ""},
		{in: "$${name}", want: "${name}"},
		{in: "$${name} and ${name}", want: "${name} and web"},
		{in: "${unset}", want: "", missing: []string{"unset"}},
		{in: "${b} ${a} ${b}", want: "  ", missing: []string{"a", "b"}},
		{in: "${not a var}", want: "${not a var}"},
		{in: "${1abc}", want: "${1abc}"},
		{in: "unterminated ${name", want: "unterminated ${name"},
		{in: "$name stays", want: "$name stays"},
	}
	for _, tt := range tests {
		got, missing := expand(tt.in, vars)
		if got != tt.want || strings.Join(missing, ",") != strings.Join(tt.missing, ",") {
			t.Errorf("expand(%q) = %q, %v; want %q, %v", tt.in, got, missing, tt.want, tt.missing)
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
`

func TestSubstitute(t *testing.T) {
	objs, err := ReadObjects(strings.NewReader(substYAML), "inline")
	if err != nil {
		t.Fatal(err)
	}
	out, err := Substitute(objs, SubstituteOptions{Vars: map[string]string{"app": "web", "replicas": "3"}})
	if err != nil {
		t.Fatal(err)
	}
	if out[0].GetName() != "web" {
		t.Errorf("name = %q", out[0].GetName())
	}
	if r := out[0].Object["spec"].(map[string]any)["replicas"]; r != int64(3) {
		t.Errorf("replicas = %#v, want the number 3", r)
	}
	if p := out[0].Object["spec"].(map[string]any)["paused"]; p != false {
		t.Errorf("paused = %#v, want false", p)
	}
	if got := out[1].Object["data"].(map[string]any)["run.sh"]; got != "echo ${HOME}" {
		t.Errorf("opted-out object was substituted: %q", got)
	}
	if objs[0].GetName() != "${app}" {
		t.Error("Substitute modified its input")
	}

	_, err = Substitute(objs, SubstituteOptions{Strict: true, Vars: map[string]string{"replicas": "3"}})
	var mv *MissingVarError
	if !errors.As(err, &mv) || mv.Vars[0] != "app" || !strings.Contains(err.Error(), "Deployment/demo/${app}") {
		t.Fatalf("strict error = %v", err)
	}
}

func TestSubstituteBreakingYAMLNamesTheObject(t *testing.T) {
	objs, _ := ReadObjects(strings.NewReader("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  k: ${v}\n"), "inline")
	_, err := Substitute(objs, SubstituteOptions{Vars: map[string]string{"v": "a: b: c"}})
	if err == nil || !strings.Contains(err.Error(), "ConfigMap/x") {
		t.Fatalf("error = %v", err)
	}
}

func FuzzExpand(f *testing.F) {
	for _, s := range []string{"${a}", "$${a}", "${a:=b}", "${", "}${x:-}", "$$${a}", "${a:=${b}}", "plain"} {
		f.Add(s)
	}
	vars := map[string]string{"a": "1", "b": "2"}
	f.Fuzz(func(t *testing.T, s string) {
		out, missing := expand(s, vars)
		if !strings.Contains(s, "${") && out != s {
			t.Fatalf("expand(%q) = %q without any reference", s, out)
		}
		for _, m := range missing {
			if !validVarName(m) {
				t.Fatalf("invalid missing name %q", m)
			}
		}
	})
}
