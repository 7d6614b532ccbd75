package testenv

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// KubeVersion is the version of the test control plane that hack/testbin.sh
// builds. Keep the two in step.
const KubeVersion = "v1.37.1"

// BinDir returns the directory that holds the test control plane binaries:
// $COZY_TESTBIN_DIR when set, else $HOME/.cache/cozy-aio/testbin/<version>.
func BinDir() string {
	if d := os.Getenv("COZY_TESTBIN_DIR"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	return filepath.Join(home, ".cache", "cozy-aio", "testbin", KubeVersion)
}

// ErrBinariesMissing means the test control plane has not been built.
var ErrBinariesMissing = errors.New("test control plane binaries are missing: run hack/testbin.sh (or make testbin)")

// checkBinaries reports which of the named binaries are missing in dir.
func checkBinaries(dir string, names ...string) error {
	var missing []string
	for _, n := range names {
		if fi, err := os.Stat(filepath.Join(dir, n)); err != nil || fi.Mode()&0o111 == 0 {
			missing = append(missing, filepath.Join(dir, n))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s", ErrBinariesMissing, strings.Join(missing, ", "))
	}
	return nil
}

// ControlPlaneOptions configures StartControlPlane. The zero value works.
type ControlPlaneOptions struct {
	// CRDs are installed before StartControlPlane returns. Default: none.
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// CRDDirectoryPaths are directories of CRD manifests to install. Default: none.
	CRDDirectoryPaths []string
	// Scheme is the client's scheme. Default: client-go's scheme.
	Scheme *runtime.Scheme
	// StartTimeout bounds the start of each component. Default: 60s.
	StartTimeout time.Duration
	// APIServerArgs are extra kube-apiserver flags, as name → value.
	APIServerArgs map[string]string
	// LogDir, when set, receives kube-apiserver.log and etcd.log. Default:
	// their output is discarded.
	LogDir string
}

// ControlPlane is a running kube-apiserver and etcd.
type ControlPlane struct {
	// Config is an admin rest.Config for the API server.
	Config *rest.Config
	// Client is an uncached controller-runtime client on Config.
	Client client.Client

	env  *envtest.Environment
	lock *os.File
	logs []*os.File
}

// StartControlPlane starts a real kube-apiserver and etcd built by
// hack/testbin.sh. It fails fast with ErrBinariesMissing when they have not
// been built, and within StartTimeout when they do not come up.
//
// Only one control plane runs at a time on the machine: StartControlPlane
// takes an exclusive file lock, released by Stop, so that parallel test
// packages on a small machine queue instead of starving each other.
func StartControlPlane(opts ControlPlaneOptions) (*ControlPlane, error) {
	dir := BinDir()
	if err := checkBinaries(dir, "kube-apiserver", "etcd"); err != nil {
		return nil, err
	}
	lock, err := lockMachine(dir)
	if err != nil {
		return nil, err
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 60 * time.Second
	}
	scheme := opts.Scheme
	if scheme == nil {
		scheme = clientgoscheme.Scheme
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    dir,
		ControlPlaneStartTimeout: opts.StartTimeout,
		ControlPlaneStopTimeout:  30 * time.Second,
		Scheme:                   scheme,
		CRDs:                     opts.CRDs,
		CRDDirectoryPaths:        opts.CRDDirectoryPaths,
		ErrorIfCRDPathMissing:    true,
	}
	api := env.ControlPlane.GetAPIServer()
	for k, v := range opts.APIServerArgs {
		api.Configure().Set(k, v)
	}
	var logs []*os.File
	closeLogs := func() {
		for _, f := range logs {
			_ = f.Close()
		}
	}
	if opts.LogDir != "" {
		apiLog, err := os.Create(filepath.Join(opts.LogDir, "kube-apiserver.log"))
		if err != nil {
			unlock(lock)
			return nil, err
		}
		etcdLog, err := os.Create(filepath.Join(opts.LogDir, "etcd.log"))
		if err != nil {
			apiLog.Close()
			unlock(lock)
			return nil, err
		}
		logs = []*os.File{apiLog, etcdLog}
		api.Out, api.Err = apiLog, apiLog
		env.ControlPlane.Etcd = &envtest.Etcd{Out: etcdLog, Err: etcdLog}
	}
	cfg, err := env.Start()
	if err != nil {
		closeLogs()
		_ = env.Stop()
		unlock(lock)
		return nil, fmt.Errorf("starting the test control plane from %s: %w", dir, err)
	}
	// Tests create many objects quickly; client-side throttling would only
	// measure the limiter.
	cfg.QPS, cfg.Burst = 1000, 2000
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = env.Stop()
		closeLogs()
		unlock(lock)
		return nil, err
	}
	return &ControlPlane{Config: cfg, Client: c, env: env, lock: lock, logs: logs}, nil
}

// Stop stops the API server and etcd and removes their data.
func (cp *ControlPlane) Stop() error {
	defer unlock(cp.lock)
	err := cp.env.Stop()
	for _, f := range cp.logs {
		_ = f.Close()
	}
	return err
}

// Kubeconfig returns a kubeconfig for a user in the given groups, for
// programs that run beside the tests (a controller manager, the cozy-aio
// binary). Use the group "system:masters" for an administrator.
func (cp *ControlPlane) Kubeconfig(user string, groups ...string) ([]byte, error) {
	u, err := cp.env.AddUser(envtest.User{Name: user, Groups: groups}, nil)
	if err != nil {
		return nil, err
	}
	return u.KubeConfig()
}

// Namespace creates a namespace with a fresh name for one test and deletes
// it when the test ends.
func (cp *ControlPlane) Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: "t-" + strings.ToLower(rand.String(8)),
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cp.Client.Create(ctx, ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cp.removeFluxObjects(ctx, t, ns.Name)
		_ = cp.Client.Delete(ctx, ns)
	})
	return ns.Name
}

// removeFluxObjects deletes the namespace's objects of every Flux kind,
// their finalizers taken off first. The test control plane runs no
// namespace controller, so a deleted namespace keeps its objects for
// ever: without this, every engine a later test starts would reconcile
// all the objects earlier tests left (their slow charts, failing sources),
// and its own objects would wait behind them.
func (cp *ControlPlane) removeFluxObjects(ctx context.Context, t testing.TB, ns string) {
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinitionList"))
	if err := cp.Client.List(ctx, &list); err != nil {
		t.Logf("testenv: listing CRDs to clean namespace %s: %v", ns, err)
		return
	}
	for _, u := range list.Items {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &crd); err != nil {
			continue
		}
		if !strings.HasSuffix(crd.Spec.Group, ".fluxcd.io") || crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if !v.Storage {
				continue
			}
			var list unstructured.UnstructuredList
			list.SetGroupVersionKind(schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.ListKind})
			if err := cp.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
				t.Logf("testenv: listing %s in %s: %v", crd.Name, ns, err)
				continue
			}
			for i := range list.Items {
				o := &list.Items[i]
				if len(o.GetFinalizers()) > 0 {
					patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
					if err := cp.Client.Patch(ctx, o, patch); client.IgnoreNotFound(err) != nil {
						t.Logf("testenv: removing finalizers of %s %s/%s: %v", crd.Spec.Names.Kind, ns, o.GetName(), err)
					}
				}
				if err := cp.Client.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
					t.Logf("testenv: deleting %s %s/%s: %v", crd.Spec.Names.Kind, ns, o.GetName(), err)
				}
			}
		}
	}
}

// Run starts a control plane, runs the tests of a package and stops the
// control plane. Use it from TestMain:
//
//	var cp *testenv.ControlPlane
//	func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &cp, testenv.ControlPlaneOptions{})) }
//
// A control plane that cannot start fails the package with a clear message;
// it never hangs and never skips silently.
//
// A fuzzing run that selects no test (go test -run '^$' -fuzz X, as make
// fuzz does) and every fuzz worker process start no control plane: fuzz
// targets are pure, a worker would wait forever for the machine lock its
// coordinator holds, and the coordinator would hold that lock for the whole
// fuzz time. *cp stays nil there.
func Run(m *testing.M, cp **ControlPlane, opts ControlPlaneOptions) int {
	if fuzzingOnly() {
		return m.Run()
	}
	started, err := StartControlPlane(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return 1
	}
	*cp = started
	code := m.Run()
	if err := started.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: stopping the control plane: %v\n", err)
	}
	return code
}

// fuzzingOnly reports whether this test binary only fuzzes: it is a fuzz
// worker, or it fuzzes with -run '^$'.
func fuzzingOnly() bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	value := func(name string) string {
		if f := flag.Lookup(name); f != nil {
			return f.Value.String()
		}
		return ""
	}
	if value("test.fuzzworker") == "true" {
		return true
	}
	return value("test.fuzz") != "" && value("test.run") == "^$"
}

// processLock lets one test process run several control planes at once
// (a management cluster and its tenant clusters) under one machine lock:
// the first takes the file lock, the last to stop releases it.
var processLock struct {
	sync.Mutex
	file  *os.File
	count int
}

// lockMachine serialises control planes built from the same binaries
// across processes; within one process it only counts them.
func lockMachine(binDir string) (*os.File, error) {
	processLock.Lock()
	defer processLock.Unlock()
	if processLock.count > 0 {
		processLock.count++
		return processLock.file, nil
	}
	f, err := flockMachine(binDir)
	if err != nil {
		return nil, err
	}
	processLock.file, processLock.count = f, 1
	return f, nil
}

func flockMachine(binDir string) (*os.File, error) {
	sum := sha256.Sum256([]byte(binDir))
	path := filepath.Join(os.TempDir(), fmt.Sprintf("cozy-aio-controlplane-%x.lock", sum[:6]))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return f, nil
}

func unlock(f *os.File) {
	if f == nil {
		return
	}
	processLock.Lock()
	defer processLock.Unlock()
	if f == processLock.file {
		if processLock.count--; processLock.count > 0 {
			return
		}
		processLock.file = nil
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	_ = f.Close()
}
