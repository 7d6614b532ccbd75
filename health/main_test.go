package health

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-aio/internal/testenv"
)

var cp *testenv.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &cp, testenv.ControlPlaneOptions{}))
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func newWaiter(t testing.TB, opts WaiterOptions) *Waiter {
	t.Helper()
	w, err := NewWaiter(cp.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func yamlInto(text string, into any) error {
	js, err := yaml.YAMLToJSON([]byte(text))
	if err != nil {
		return err
	}
	return json.Unmarshal(js, into)
}
