package health_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-aio/health"
)

func decode(text string) *unstructured.Unstructured {
	js, err := yaml.YAMLToJSON([]byte(strings.TrimSpace(text)))
	if err != nil {
		log.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(js); err != nil {
		log.Fatal(err)
	}
	return u
}

func ExampleCompute() {
	d := decode(`
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: demo, generation: 1}
spec: {replicas: 3}
status: {observedGeneration: 1, replicas: 3, updatedReplicas: 3, readyReplicas: 1, availableReplicas: 1}
`)
	r, err := health.Compute(d)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Status, r.Message)
	// Output:
	// InProgress Available: 1/3
}

func ExampleChecker_Compute() {
	checker, err := health.NewChecker([]health.Expr{{
		APIVersion: "example.com/v1",
		Kind:       "Database",
		Current:    "status.phase == 'Running'",
		Failed:     "status.phase == 'Crashed'",
	}})
	if err != nil {
		log.Fatal(err)
	}
	for _, phase := range []string{"Starting", "Running", "Crashed"} {
		db := decode(`
apiVersion: example.com/v1
kind: Database
metadata: {name: main, namespace: demo}
status: {phase: ` + phase + `}
`)
		r, _ := checker.Compute(db)
		fmt.Println(phase, "=>", r.Status)
	}
	// Output:
	// Starting => InProgress
	// Running => Current
	// Crashed => Failed
}

// A reconciler starts the wait, returns its worker, and is called back.
func ExampleWaiter_Start() {
	var cfg *rest.Config // for example ctrl.GetConfigOrDie()
	waiter, err := health.NewWaiter(cfg, health.WaiterOptions{})
	if err != nil {
		log.Fatal(err)
	}
	refs := []health.ObjectRef{{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "demo", Name: "web"}}
	handle := waiter.Start(context.Background(), refs, health.WaitOptions{
		Timeout: 5 * time.Minute,
		OnDone: func(r health.Report, err error) {
			if err != nil {
				fmt.Println("not ready:\n" + r.String()) // what is not ready and why
				return
			}
			fmt.Println("ready")
		},
	})
	// Later, when a new revision arrives:
	handle.Cancel()
}
