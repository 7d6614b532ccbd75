package bootstrap

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// StaticPodOptions configures RenderStaticPod. The zero value renders the
// default manifest.
type StaticPodOptions struct {
	// Name of the pod. Default: cozy-aio.
	Name string
	// Namespace of the pod. Default: kube-system.
	Namespace string
	// Image of the container. Default: ghcr.io/cozystack/cozy-aio:latest.
	Image string
	// Kubeconfig is the host path of the kubeconfig cozy-aio uses.
	// Default: /etc/kubernetes/cozy-aio.conf.
	Kubeconfig string
	// BootstrapDir is the host directory of bootstrap objects.
	// Default: /etc/cozy-aio/bootstrap.
	BootstrapDir string
	// DataDir is the host directory for artifacts and state.
	// Default: /var/lib/cozy-aio.
	DataDir string
	// HealthPort serves /healthz, /readyz and /metrics. Default: 9440.
	HealthPort int
	// ArtifactPort serves artifacts on loopback. Default: 9090.
	ArtifactPort int
	// MemoryLimit of the container; GOMEMLIMIT is set to 90% of it.
	// Default: 1Gi.
	MemoryLimit string
	// MemoryRequest and CPURequest. Defaults: 256Mi and 100m.
	MemoryRequest, CPURequest string
	// ExtraArgs are appended to the run command. Default: none.
	ExtraArgs []string
}

func (o StaticPodOptions) withDefaults() StaticPodOptions {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&o.Name, "cozy-aio")
	def(&o.Namespace, "kube-system")
	def(&o.Image, "ghcr.io/cozystack/cozy-aio:latest")
	def(&o.Kubeconfig, "/etc/kubernetes/cozy-aio.conf")
	def(&o.BootstrapDir, "/etc/cozy-aio/bootstrap")
	def(&o.DataDir, "/var/lib/cozy-aio")
	def(&o.MemoryLimit, "1Gi")
	def(&o.MemoryRequest, "256Mi")
	def(&o.CPURequest, "100m")
	if o.HealthPort == 0 {
		o.HealthPort = 9440
	}
	if o.ArtifactPort == 0 {
		o.ArtifactPort = 9090
	}
	return o
}

// notReadyTolerations are the taints a node carries before its network
// exists; the static pod tolerates them all.
var notReadyTolerations = []string{
	"node.kubernetes.io/not-ready",
	"node.cloudprovider.kubernetes.io/uninitialized",
	"node.kubernetes.io/network-unavailable",
	"node.cilium.io/agent-not-ready",
	"node-role.kubernetes.io/control-plane",
}

// staticPod returns the static pod that runs cozy-aio on a node: host
// network, node-critical priority, tolerations for a node without a
// network, host paths, probes and GOMEMLIMIT.
func staticPod(opts StaticPodOptions) (*corev1.Pod, error) {
	o := opts.withDefaults()
	limit, err := resource.ParseQuantity(o.MemoryLimit)
	if err != nil {
		return nil, fmt.Errorf("memory limit %q: %w", o.MemoryLimit, err)
	}
	memReq, err := resource.ParseQuantity(o.MemoryRequest)
	if err != nil {
		return nil, fmt.Errorf("memory request %q: %w", o.MemoryRequest, err)
	}
	cpuReq, err := resource.ParseQuantity(o.CPURequest)
	if err != nil {
		return nil, fmt.Errorf("cpu request %q: %w", o.CPURequest, err)
	}
	args := append([]string{
		"run",
		"--kubeconfig=/etc/cozy-aio/kubeconfig",
		"--bootstrap-dir=/etc/cozy-aio/bootstrap",
		"--data-dir=/var/lib/cozy-aio",
		"--health-addr=127.0.0.1:" + strconv.Itoa(o.HealthPort),
		"--artifact-addr=127.0.0.1:" + strconv.Itoa(o.ArtifactPort),
	}, o.ExtraArgs...)
	probe := func(path string, period int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Host: "127.0.0.1", Path: path, Port: intstr.FromInt32(int32(o.HealthPort)),
			}},
			PeriodSeconds: period, TimeoutSeconds: 5, FailureThreshold: 3,
		}
	}
	var tolerations []corev1.Toleration
	for _, k := range notReadyTolerations {
		tolerations = append(tolerations, corev1.Toleration{Key: k, Operator: corev1.TolerationOpExists})
	}
	hostPath := func(name, path string, t corev1.HostPathType) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &t},
		}}
	}
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: o.Name, Namespace: o.Namespace,
			Labels: map[string]string{"app.kubernetes.io/name": "cozy-aio", "tier": "control-plane"},
		},
		Spec: corev1.PodSpec{
			HostNetwork:       true,
			DNSPolicy:         corev1.DNSClusterFirstWithHostNet,
			PriorityClassName: "system-node-critical",
			Tolerations:       tolerations,
			Containers: []corev1.Container{{
				Name:    "cozy-aio",
				Image:   o.Image,
				Command: []string{"/cozy-aio"},
				Args:    args,
				// The same manifest on every control-plane node: each replica
				// is named after its node (--replica-id) and keeps its Leases
				// in the pod's namespace.
				Env: []corev1.EnvVar{
					{Name: "GOMEMLIMIT", Value: strconv.FormatInt(limit.Value()*9/10, 10)},
					{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
					{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
				},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceMemory: memReq, corev1.ResourceCPU: cpuReq},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: limit},
				},
				LivenessProbe:  probe("/healthz", 10),
				ReadinessProbe: probe("/readyz", 5),
				VolumeMounts: []corev1.VolumeMount{
					{Name: "kubeconfig", MountPath: "/etc/cozy-aio/kubeconfig", ReadOnly: true},
					{Name: "bootstrap", MountPath: "/etc/cozy-aio/bootstrap", ReadOnly: true},
					{Name: "data", MountPath: "/var/lib/cozy-aio"},
				},
			}},
			Volumes: []corev1.Volume{
				hostPath("kubeconfig", o.Kubeconfig, corev1.HostPathFile),
				hostPath("bootstrap", o.BootstrapDir, corev1.HostPathDirectoryOrCreate),
				hostPath("data", o.DataDir, corev1.HostPathDirectoryOrCreate),
			},
		},
	}
	return pod, nil
}

// RenderStaticPod returns the static pod that runs cozy-aio on a node, as
// YAML ready for the kubelet's manifest directory: host network,
// node-critical priority, tolerations for a node without a network, host
// paths, probes and GOMEMLIMIT.
func RenderStaticPod(opts StaticPodOptions) ([]byte, error) {
	pod, err := staticPod(opts)
	if err != nil {
		return nil, err
	}
	b, err := yaml.Marshal(pod)
	if err != nil {
		return nil, err
	}
	// Drop the empty status and creationTimestamp that a typed Pod carries.
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	return yaml.Marshal(m)
}
