package bootstrap_test

import (
	"fmt"
	"log"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-aio/bootstrap"
)

// The manifest a node's kubelet runs cozy-aio from; testdata holds the
// whole default one.
func ExampleRenderStaticPod() {
	manifest, err := bootstrap.RenderStaticPod(bootstrap.StaticPodOptions{
		Image:       "ghcr.io/cozystack/cozy-aio:v0.1.0",
		MemoryLimit: "2Gi",
		ExtraArgs:   []string{"--shards=4"},
	})
	if err != nil {
		log.Fatal(err)
	}
	// On the node: os.WriteFile("/etc/kubernetes/manifests/cozy-aio.yaml", manifest, 0o600)

	var pod corev1.Pod
	if err := yaml.Unmarshal(manifest, &pod); err != nil {
		log.Fatal(err)
	}
	c := pod.Spec.Containers[0]
	fmt.Println(pod.Namespace+"/"+pod.Name, "hostNetwork:", pod.Spec.HostNetwork, "tolerations:", len(pod.Spec.Tolerations))
	fmt.Println(c.Image, strings.Join(c.Args, " "))
	fmt.Println(c.Env[0].Name+"="+c.Env[0].Value, "limit:", c.Resources.Limits.Memory())
	// Output:
	// kube-system/cozy-aio hostNetwork: true tolerations: 5
	// ghcr.io/cozystack/cozy-aio:v0.1.0 run --kubeconfig=/etc/cozy-aio/kubeconfig --bootstrap-dir=/etc/cozy-aio/bootstrap --data-dir=/var/lib/cozy-aio --health-addr=127.0.0.1:9440 --artifact-addr=127.0.0.1:9090 --shards=4
	// GOMEMLIMIT=1932735283 limit: 2Gi
}
