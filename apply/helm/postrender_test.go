package helm

import (
	"bytes"
	"strings"
	"testing"
	"time"

	kusttypes "sigs.k8s.io/kustomize/api/types"
)

func TestPostRenderOrderAndScope(t *testing.T) {
	in := bytes.NewBufferString(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: "nginx:1.0"}]}
`)
	p := PostRender{
		Kustomize: []KustomizeOverlay{
			{Images: []kusttypes.Image{{Name: "nginx", NewTag: "1.1"}}},
			{Images: []kusttypes.Image{{Name: "nginx", NewName: "mirror/nginx"}}},
		},
		Labels:       map[string]string{"team": "a", "origin": "common"},
		Annotations:  map[string]string{"owner": "x"},
		OriginLabels: map[string]string{"origin": "release"},
	}
	out, err := p.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"image: mirror/nginx:1.1", "team: a", "origin: release", "owner: x"} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %q in\n%s", want, s)
		}
	}
	if strings.Count(s, "team: a") != 1 {
		t.Errorf("common labels must reach metadata only:\n%s", s)
	}
	if _, err := (PostRender{Kustomize: []KustomizeOverlay{{Patches: []kusttypes.Patch{{Patch: "- op: replace\n  path: /spec/nowhere/x\n  value: 1\n",
		Target: &kusttypes.Selector{}}}}}}).Run(bytes.NewBufferString(s)); err == nil || !strings.Contains(err.Error(), "post-renderer 0") {
		t.Errorf("a patch path that does not exist: %v", err)
	}
}

func TestPostRenderDigest(t *testing.T) {
	if (PostRender{OriginLabels: map[string]string{"a": "b"}}).digestPart() != "" {
		t.Error("origin labels alone must not change a release's digest")
	}
	if (PostRender{Labels: map[string]string{"a": "b"}}).digestPart() == "" {
		t.Error("common labels must change the digest")
	}
}

func TestRemedyUsesRollbackSettings(t *testing.T) {
	o := ReconcileOptions{Spec: Spec{Timeout: time.Minute, DisableHooks: true, MaxHistory: 3}}
	if r := o.remedy(); r.Timeout != time.Minute || !r.DisableHooks || r.MaxHistory != 3 {
		t.Fatalf("default remedy = %+v", r)
	}
	o.Rollback = &RollbackOptions{Timeout: 2 * time.Minute, Force: true}
	if r := o.remedy(); r.Timeout != 2*time.Minute || r.DisableHooks || !r.Force || r.MaxHistory != 3 {
		t.Fatalf("spec.rollback remedy = %+v", r)
	}
}
