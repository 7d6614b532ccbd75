package testenv

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
)

// kwokStages are the node and pod lifecycles the simulator plays.
//
//go:embed kwok-stages.yaml
var kwokStages []byte

// NetworkAnnotation is set to "ready" on a node by the simulated network
// plugin once the network agent's pod runs there; kwok then reports the
// node healthy.
const NetworkAnnotation = "sim.cozy-aio.cozystack.io/network"

// DefaultNetworkPodLabels select the network agent's pods by default.
var DefaultNetworkPodLabels = map[string]string{"app.kubernetes.io/name": "sim-cni"}

// ClusterOptions configures StartCluster. The zero value gives three
// nodes without a network.
type ClusterOptions struct {
	// ControlPlane configures the API server and etcd. A service IP range
	// of 10.96.0.0/16 is set unless APIServerArgs names one.
	ControlPlane ControlPlaneOptions
	// Nodes is the number of simulated nodes. Default: 3.
	Nodes int
	// NetworkPodLabels select the pods of the network agent (the CNI
	// DaemonSet). Default: DefaultNetworkPodLabels.
	NetworkPodLabels map[string]string
	// NetworkDelay is how long the simulated network plugin takes from
	// its agent pod being Ready on a node to the node's network, as a real
	// CNI agent takes a while to configure a node. Default: none.
	NetworkDelay time.Duration
	// LogDir receives one log file per part and the admin kubeconfig.
	// Default: a new temporary directory, kept after Stop for reading.
	LogDir string
}

// Cluster is a simulated cluster: a real kube-apiserver, etcd,
// kube-controller-manager and kube-scheduler, kwok playing the nodes and
// pods, and a simulated network plugin.
type Cluster struct {
	*ControlPlane
	// Kubeconfig is the path of an administrator kubeconfig.
	Kubeconfig string
	// LogDir holds one log file per part.
	LogDir string
	// Nodes are the simulated nodes' names.
	Nodes []string

	procs  []*exec.Cmd
	cancel context.CancelFunc
	done   chan struct{}

	mu sync.Mutex
	// agentReadyAt is when the plugin first saw a Ready agent pod on each
	// node, networkAt when it gave the node its network.
	agentReadyAt, networkAt map[string]time.Time
}

// StartCluster starts a simulated cluster whose nodes are registered but
// have no network: Ready=False with NetworkPluginNotReady,
// NetworkUnavailable=True, and the not-ready taint. A node gets its
// network once a pod selected by NetworkPodLabels runs on it, as with a
// real CNI agent. It needs the binaries of hack/testbin.sh cluster.
func StartCluster(ctx context.Context, opts ClusterOptions) (*Cluster, error) {
	dir := BinDir()
	if err := checkBinaries(dir, "kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler", "kwok"); err != nil {
		return nil, fmt.Errorf("%w (the cluster simulator needs: hack/testbin.sh cluster)", err)
	}
	if opts.Nodes <= 0 {
		opts.Nodes = 3
	}
	if opts.NetworkPodLabels == nil {
		opts.NetworkPodLabels = DefaultNetworkPodLabels
	}
	if opts.LogDir == "" {
		d, err := os.MkdirTemp("", "cozy-aio-cluster-")
		if err != nil {
			return nil, err
		}
		opts.LogDir = d
	}
	if err := os.MkdirAll(opts.LogDir, 0o755); err != nil {
		return nil, err
	}
	cpOpts := opts.ControlPlane
	args := map[string]string{"service-cluster-ip-range": "10.96.0.0/16"}
	for k, v := range cpOpts.APIServerArgs {
		args[k] = v
	}
	cpOpts.APIServerArgs = args
	cpOpts.LogDir = opts.LogDir
	cp, err := StartControlPlane(cpOpts)
	if err != nil {
		return nil, err
	}
	c := &Cluster{ControlPlane: cp, LogDir: opts.LogDir, agentReadyAt: map[string]time.Time{}, networkAt: map[string]time.Time{}, done: make(chan struct{})}
	if err := c.start(ctx, dir, opts); err != nil {
		_ = c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context, bin string, opts ClusterOptions) error {
	kc, err := c.ControlPlane.Kubeconfig("cozy-sim-admin", "system:masters")
	if err != nil {
		return err
	}
	c.Kubeconfig = filepath.Join(c.LogDir, "kubeconfig")
	if err := os.WriteFile(c.Kubeconfig, kc, 0o600); err != nil {
		return err
	}
	stages := filepath.Join(c.LogDir, "kwok-stages.yaml")
	if err := os.WriteFile(stages, kwokStages, 0o644); err != nil {
		return err
	}
	schedCfg := filepath.Join(c.LogDir, "kube-scheduler.yaml")
	if err := os.WriteFile(schedCfg, []byte(fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: 500
  burst: 1000
leaderElection:
  leaderElect: false
`, c.Kubeconfig)), 0o644); err != nil {
		return err
	}
	parts := []struct {
		name string
		args []string
	}{
		{"kube-controller-manager", []string{
			"--kubeconfig=" + c.Kubeconfig,
			"--leader-elect=false",
			"--secure-port=0",
			"--use-service-account-credentials=false",
			"--kube-api-qps=500", "--kube-api-burst=1000",
			"--concurrent-deployment-syncs=10", "--concurrent-replicaset-syncs=10",
			"--concurrent-daemonset-syncs=4",
		}},
		{"kube-scheduler", []string{"--config=" + schedCfg, "--secure-port=0"}},
		{"kwok", []string{
			"--kubeconfig=" + c.Kubeconfig,
			"--config=" + stages,
			"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
			"--node-lease-duration-seconds=40",
			"--cidr=10.244.0.0/16",
			"--node-ip=10.89.0.1",
		}},
	}
	for _, p := range parts {
		if err := c.run(filepath.Join(bin, p.name), p.args); err != nil {
			return err
		}
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	for i := 1; i <= opts.Nodes; i++ {
		name := fmt.Sprintf("node-%d", i)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
				Labels: map[string]string{
					"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
					"type": "kwok",
				},
			},
			// As a kubelet registers: not ready until the runtime network is.
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule}}},
		}
		if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("registering node %s: %w", name, err)
		}
		c.Nodes = append(c.Nodes, name)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() {
		defer close(c.done)
		c.networkPlugin(runCtx, cs, opts.NetworkPodLabels, opts.NetworkDelay)
	}()
	// The nodes are up once kwok has played their first stage.
	return waitUntil(ctx, 2*time.Minute, func() (bool, error) {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		up := 0
		for _, n := range nodes.Items {
			if n.Status.Phase == corev1.NodeRunning {
				up++
			}
		}
		return up == opts.Nodes, nil
	}, "kwok to bring the nodes up (see "+filepath.Join(c.LogDir, "kwok.log")+")")
}

// run starts one part with its output in LogDir/<name>.log. The part dies
// with this process even when Stop is never called.
func (c *Cluster) run(path string, args []string) error {
	name := filepath.Base(path)
	logf, err := os.Create(filepath.Join(c.LogDir, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		_ = cmd.Wait()
		logf.Close()
	}()
	c.procs = append(c.procs, cmd)
	return nil
}

// networkPlugin is the simulated CNI: delay after a network agent pod is
// Running and Ready on a node, the node gets its network.
func (c *Cluster) networkPlugin(ctx context.Context, cs kubernetes.Interface, sel map[string]string, delay time.Duration) {
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = labels.SelectorFromSet(sel).String()
	}))
	inf := f.Core().V1().Pods().Informer()
	var handle func(obj any)
	handle = func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.Spec.NodeName == "" || pod.Status.Phase != corev1.PodRunning || !podReady(pod) {
			return
		}
		node := pod.Spec.NodeName
		c.mu.Lock()
		_, done := c.networkAt[node]
		first, seen := c.agentReadyAt[node]
		if !seen {
			first = time.Now()
			c.agentReadyAt[node] = first
		}
		c.mu.Unlock()
		if done {
			return
		}
		if wait := time.Until(first.Add(delay)); wait > 0 {
			if !seen {
				time.AfterFunc(wait, func() { handle(pod) })
			}
			return
		}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"ready"}}}`, NetworkAnnotation)
		if _, err := cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return // the next pod event retries
		}
		c.mu.Lock()
		if _, done := c.networkAt[node]; !done {
			c.networkAt[node] = time.Now()
		}
		c.mu.Unlock()
	}
	_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    handle,
		UpdateFunc: func(_, o any) { handle(o) },
	})
	inf.Run(ctx.Done())
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// NetworkReadyAt returns when the simulated network plugin configured
// each node so far.
func (c *Cluster) NetworkReadyAt() map[string]time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]time.Time, len(c.networkAt))
	for k, v := range c.networkAt {
		out[k] = v
	}
	return out
}

// Stop stops every part, the network plugin and the control plane. No
// process is left behind.
func (c *Cluster) Stop() error {
	if c.cancel != nil {
		c.cancel()
		<-c.done
		c.cancel = nil
	}
	var errs []error
	for i := len(c.procs) - 1; i >= 0; i-- {
		errs = append(errs, stopProcess(c.procs[i], 10*time.Second))
	}
	c.procs = nil
	if c.ControlPlane != nil {
		errs = append(errs, c.ControlPlane.Stop())
		c.ControlPlane = nil
	}
	return errors.Join(errs...)
}

// stopProcess sends SIGTERM to a part's process group, then SIGKILL after
// grace.
func stopProcess(cmd *exec.Cmd, grace time.Duration) error {
	if cmd.Process == nil {
		return nil
	}
	pgid := -cmd.Process.Pid
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if syscall.Kill(cmd.Process.Pid, 0) != nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(pgid, syscall.SIGKILL)
	return nil
}

func waitUntil(parent context.Context, timeout time.Duration, cond func() (bool, error), what string) error {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			if err := parent.Err(); err != nil {
				return fmt.Errorf("stopped while waiting for %s: %w", what, err)
			}
			return fmt.Errorf("timed out after %s waiting for %s", timeout, what)
		case <-t.C:
		}
	}
}
