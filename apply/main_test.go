package apply

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cozystack/cozy-aio/internal/testenv"
)

var cp *testenv.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &cp, testenv.ControlPlaneOptions{}))
}

// objects decodes inline YAML with every "NS" replaced by ns.
func objects(t testing.TB, ns, text string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := ReadObjects(strings.NewReader(strings.ReplaceAll(text, "NS", ns)), t.Name())
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func newApplier(t testing.TB, opts Options) *Applier {
	t.Helper()
	a, err := New(cp.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func actions(cs ChangeSet) map[string]Action {
	m := map[string]Action{}
	for _, c := range cs.Changes {
		m[c.Object.String()] = c.Action
	}
	return m
}

func wantActions(t *testing.T, cs ChangeSet, want map[string]Action) {
	t.Helper()
	got := actions(cs)
	for k, a := range want {
		if got[k] != a {
			t.Errorf("%s: action %q, want %q (change set:\n%s)", k, got[k], a, cs)
		}
	}
	if len(got) != len(want) {
		t.Errorf("change set has %d entries, want %d:\n%s", len(got), len(want), cs)
	}
}
