package apply_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/cozystack/cozy-aio/apply"
	"github.com/cozystack/cozy-aio/health"
)

func ExampleBuild() {
	// testdata/withbase has a kustomization.yaml; a directory without one
	// gets a generated kustomization over all its manifests.
	objs, err := apply.Build(context.Background(), "testdata/withbase", apply.BuildOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for _, o := range objs {
		fmt.Println(health.RefOf(o))
	}
	// Output:
	// Service/prod/web
}

func ExampleSubstitute() {
	objs, err := apply.ReadObjects(strings.NewReader(`
apiVersion: apps/v1
kind: Deployment
metadata:
  name: ${app}
  namespace: ${namespace:=default}
  annotations:
    note: $${kept} literally
spec:
  replicas: ${replicas}
`), "deploy.yaml")
	if err != nil {
		log.Fatal(err)
	}
	out, err := apply.Substitute(objs, apply.SubstituteOptions{
		Vars:   map[string]string{"app": "web", "replicas": "3"},
		Strict: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	d := out[0]
	replicas := d.Object["spec"].(map[string]any)["replicas"]
	fmt.Println(health.RefOf(d), replicas, d.GetAnnotations()["note"])

	_, err = apply.Substitute(objs, apply.SubstituteOptions{Vars: map[string]string{"app": "web"}, Strict: true})
	fmt.Println(err)
	// Output:
	// Deployment/default/web 3 ${kept} literally
	// Deployment/${namespace:=default}/${app}: post-build substitution: envsubst error: variable substitution failed: variable not set (strict mode): "replicas"
}

func ExampleInventory_Stale() {
	cm := func(name string) health.ObjectRef {
		return health.ObjectRef{Version: "v1", Kind: "ConfigMap", Namespace: "demo", Name: name}
	}
	previous := apply.NewInventory(cm("a"), cm("b"), cm("c"))
	current := apply.NewInventory(cm("a"), cm("c"))
	for _, ref := range previous.Stale(current) {
		fmt.Println("prune", ref, ref.ID())
	}
	// Output:
	// prune ConfigMap/demo/b demo_b__ConfigMap
}

// The whole Kustomization path: build, substitute, apply in stages, prune
// what left the inventory.
func ExampleApplier_Apply() {
	var cfg *rest.Config // for example ctrl.GetConfigOrDie()
	ctx := context.Background()

	// One Cache per process, started once, shared by all Appliers.
	cache, err := apply.NewCache(cfg)
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = cache.Start(ctx) }()

	applier, err := apply.New(cfg, apply.Options{
		FieldManager: "my-operator",
		Impersonate:  apply.ServiceAccount{Namespace: "tenant-a", Name: "deployer"},
		Cache:        cache,
	})
	if err != nil {
		log.Fatal(err)
	}
	objs, err := apply.Build(ctx, "./deploy", apply.BuildOptions{})
	if err != nil {
		log.Fatal(err)
	}
	objs, err = apply.Substitute(objs, apply.SubstituteOptions{Vars: map[string]string{"cluster": "prod"}})
	if err != nil {
		log.Fatal(err)
	}
	owner := apply.Owner{Name: "apps", Namespace: "tenant-a"}
	cs, err := applier.Apply(ctx, objs, apply.ApplyOptions{
		Owner:        owner,
		KindPolicies: map[schema.GroupKind]apply.ImmutablePolicy{{Group: "batch", Kind: "Job"}: apply.ImmutableRecreate},
		WaitTimeout:  time.Minute,
	})
	if err != nil {
		log.Fatal(err) // an *apply.ImmutableError names the object and field
	}
	var previous apply.Inventory // from the last run's status
	pruned, err := applier.Prune(ctx, previous.Stale(cs.Inventory()), apply.PruneOptions{Owner: owner})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(cs, pruned)
}

func ExampleApplier_Diff() {
	var applier *apply.Applier // from apply.New
	objs, err := apply.Build(context.Background(), "./deploy", apply.BuildOptions{})
	if err != nil {
		log.Fatal(err)
	}
	res, err := applier.Diff(context.Background(), objs, apply.DiffOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range res.Drifted {
		fmt.Println(d.Object, "drifted:", d.Fields)
	}
}
