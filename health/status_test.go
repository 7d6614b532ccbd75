package health

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func object(t testing.TB, text string) *unstructured.Unstructured {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(js); err != nil {
		t.Fatal(err)
	}
	return u
}

const (
	deployProgressing = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ns, generation: 2}
spec: {replicas: 2}
status: {observedGeneration: 2, replicas: 2, updatedReplicas: 1, readyReplicas: 1, availableReplicas: 1}
`
	deployReady = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ns, generation: 2}
spec: {replicas: 2}
status:
  observedGeneration: 2
  replicas: 2
  updatedReplicas: 2
  readyReplicas: 2
  availableReplicas: 2
  conditions:
    - {type: Available, status: "True"}
    - {type: Progressing, status: "True", reason: NewReplicaSetAvailable}
`
	deployStaleGeneration = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ns, generation: 3}
spec: {replicas: 1}
status: {observedGeneration: 2, replicas: 1, updatedReplicas: 1, readyReplicas: 1, availableReplicas: 1}
`
	configMap   = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: ns}\n"
	terminating = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: ns, deletionTimestamp: '2026-01-01T00:00:00Z'}\n"
	widget      = `
apiVersion: example.com/v1
kind: Widget
metadata: {name: w, namespace: ns, generation: 1}
status:
  observedGeneration: 1
  phase: PHASE
  conditions: [{type: Ready, status: "False", reason: Provisioning}]
`
	widgetNoStatus = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: ns}\n"
)

var widgetExprs = []Expr{{
	APIVersion: "example.com/v1",
	Kind:       "Widget",
	Current:    "status.phase == 'Ready'",
	Failed:     "status.phase == 'Error'",
	InProgress: "status.phase == 'Provisioning'",
}}

func TestCompute(t *testing.T) {
	checker, err := NewChecker(widgetExprs)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		checker *Checker
		yaml    string
		want    Status
		message string
	}{
		{"deployment rolling out", nil, deployProgressing, InProgress, "Updated: 1/2"},
		{"deployment ready", nil, deployReady, Current, ""},
		{"deployment not observed", nil, deployStaleGeneration, InProgress, ""},
		{"configmap", nil, configMap, Current, ""},
		{"terminating", nil, terminating, Terminating, ""},
		{"widget with kstatus only", nil, strings.Replace(widget, "PHASE", "Ready", 1), InProgress, ""},
		{"widget current by CEL", checker, strings.Replace(widget, "PHASE", "Ready", 1), Current, "current is true"},
		{"widget failed by CEL", checker, strings.Replace(widget, "PHASE", "Error", 1), Failed, "failed is true"},
		{"widget in progress by CEL", checker, strings.Replace(widget, "PHASE", "Provisioning", 1), InProgress, "inProgress is true"},
		{"widget none true", checker, strings.Replace(widget, "PHASE", "Other", 1), InProgress, "not true yet"},
		{"widget without status", checker, widgetNoStatus, InProgress, "no such attribute"},
		{"other kinds keep kstatus", checker, deployReady, Current, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.checker.Compute(object(t, tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != tt.want || !strings.Contains(got.Message, tt.message) {
				t.Fatalf("got %s %q, want %s containing %q", got.Status, got.Message, tt.want, tt.message)
			}
		})
	}
}

func TestNewCheckerErrorsNameTheExpression(t *testing.T) {
	tests := []struct {
		expr Expr
		want string
	}{
		{Expr{APIVersion: "example.com/v1", Kind: "Widget"}, "example.com/v1/Widget: current is required"},
		{Expr{Kind: "Widget", Current: "true"}, "apiVersion and kind are required"},
		{Expr{APIVersion: "example.com/v1", Kind: "Widget", Current: "true", Failed: "status.("}, "expression failed for example.com/v1/Widget"},
	}
	for _, tt := range tests {
		_, err := NewChecker([]Expr{tt.expr})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("error = %v, want %q", err, tt.want)
		}
	}
}

func TestReport(t *testing.T) {
	r := Report{Objects: []ObjectStatus{
		{Object: ObjectRef{Kind: "ConfigMap", Namespace: "a", Name: "x"}, Status: Current},
		{Object: ObjectRef{Group: "apps", Kind: "Deployment", Namespace: "a", Name: "web"}, Status: InProgress, Message: "Available: 0/1"},
	}}
	if r.Ready() || len(r.NotReady()) != 1 || r.String() != "Deployment/a/web: InProgress: Available: 0/1" {
		t.Fatalf("report: ready=%v %q", r.Ready(), r.String())
	}
	err := &NotReadyError{Report: r, Err: ErrTimeout}
	if err.Error() != "timed out waiting for readiness: 1 of 2 objects not ready: Deployment/a/web: InProgress: Available: 0/1" {
		t.Fatalf("error = %q", err)
	}
}
