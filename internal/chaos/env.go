package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/demo"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

// EnvOptions configure StartEnv.
type EnvOptions struct {
	// Binary is the cozy-aio binary (required); WorkDir holds its data
	// directory and every log (default: a new temporary directory).
	Binary, WorkDir string
	// Shards and Workers are passed to cozy-aio. Defaults: 2 and 4.
	Shards, Workers int
	// Out receives progress lines. Default: discard.
	Out io.Writer
}

// Env is the real system under test: a kube-apiserver and etcd, an OCI
// registry and a Git server each behind a Gate, and the cozy-aio binary,
// with the credentials the campaign planted to look for in its output.
type Env struct {
	CP      *testenv.ControlPlane
	C       client.Client
	Kube    kubernetes.Interface
	Cozy    *demo.Process
	Reg     *testenv.Registry
	RegGate *Gate
	Git     *testenv.GitServer
	GitGate *Gate
	// Repo is the platform repository the Kustomizations read.
	Repo *testenv.GitRepo
	// Secrets are the planted credentials: the Git and registry passwords.
	Secrets []string
	// Logs is the directory of every log.
	Logs string

	regUser, regPass string
	gitUser, gitPass string
	faults           *controlPlaneFaults
	out              io.Writer
	start            time.Time
}

// StartEnv starts the control plane, the sources behind their gates and
// cozy-aio. Close stops everything.
func StartEnv(ctx context.Context, o EnvOptions) (_ *Env, err error) {
	if o.Binary == "" {
		return nil, fmt.Errorf("chaos: no cozy-aio binary given")
	}
	if o.WorkDir == "" {
		if o.WorkDir, err = os.MkdirTemp("", "cozy-aio-chaos-"); err != nil {
			return nil, err
		}
	}
	if o.Shards <= 0 {
		o.Shards = 2
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	e := &Env{Logs: filepath.Join(o.WorkDir, "logs"), out: o.Out, start: time.Now(),
		regUser: "chaos", regPass: randomString(), gitUser: "chaos", gitPass: randomString()}
	e.Secrets = []string{e.regPass, e.gitPass}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	if err := os.MkdirAll(e.Logs, 0o755); err != nil {
		return nil, err
	}
	if e.Reg, err = testenv.StartRegistry(testenv.RegistryOptions{Username: e.regUser, Password: e.regPass}); err != nil {
		return nil, err
	}
	if e.RegGate, err = StartGate("http://" + e.Reg.Host()); err != nil {
		return nil, err
	}
	if e.Git, err = testenv.StartGitServer(testenv.GitOptions{Username: e.gitUser, Password: e.gitPass}); err != nil {
		return nil, err
	}
	if e.GitGate, err = StartGate(strings.TrimSuffix(e.Git.URL("x"), "/x")); err != nil {
		return nil, err
	}
	if e.Repo, err = e.Git.Repo("platform"); err != nil {
		return nil, err
	}
	e.Say("starting kube-apiserver and etcd")
	if e.CP, err = testenv.StartControlPlane(testenv.ControlPlaneOptions{Scheme: engine.NewScheme(), LogDir: e.Logs, StartTimeout: 2 * time.Minute}); err != nil {
		return nil, err
	}
	e.C = e.CP.Client
	if e.Kube, err = kubernetes.NewForConfig(e.CP.Config); err != nil {
		return nil, err
	}
	e.faults = &controlPlaneFaults{c: e.C, logs: e.Logs}
	if err := engine.InstallCRDs(ctx, e.CP.Config, ""); err != nil {
		return nil, err
	}
	kc, err := e.CP.Kubeconfig("cozy-aio", "system:masters")
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(e.Logs, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	if e.Cozy, err = demo.NewProcess(demo.ProcessOptions{
		Binary: o.Binary, WorkDir: o.WorkDir, Logs: e.Logs, ID: "chaos",
		Server: e.CP.Config.Host, Kubeconfig: kubeconfig, Health: port,
		Shards: o.Shards, Workers: o.Workers, Extra: []string{"--network-phase=false"},
	}); err != nil {
		return nil, err
	}
	e.Say("starting cozy-aio: %s", strings.Join(e.Cozy.Args(), " "))
	if err := e.Cozy.Start(); err != nil {
		return nil, err
	}
	return e, nil
}

// Say prints a progress line.
func (e *Env) Say(format string, args ...any) {
	fmt.Fprintf(e.out, "[%6.1fs] %s\n", time.Since(e.start).Seconds(), fmt.Sprintf(format, args...))
}

// RegistryHost is the registry as cozy-aio reaches it: through its gate.
func (e *Env) RegistryHost() string { return e.RegGate.Addr() }

// GitURL is the platform repository as cozy-aio reaches it.
func (e *Env) GitURL() string { return e.GitGate.URL() + "/platform" }

// DockerConfigJSON holds the registry's credentials for its gate's host.
func (e *Env) DockerConfigJSON() []byte {
	b, _ := json.Marshal(map[string]any{"auths": map[string]any{
		e.RegistryHost(): map[string]string{"username": e.regUser, "password": e.regPass},
	}})
	return b
}

// GitAuth is the Git server's basic auth, as a Secret's data.
func (e *Env) GitAuth() map[string]string {
	return map[string]string{"username": e.gitUser, "password": e.gitPass}
}

// RestartAPIServer kills kube-apiserver and starts it again; it returns
// when it was killed.
func (e *Env) RestartAPIServer(ctx context.Context) (time.Time, error) {
	return e.faults.RestartAPIServer(ctx)
}

// PauseEtcd stops etcd for d and returns when it was resumed.
func (e *Env) PauseEtcd(ctx context.Context, d time.Duration) (time.Time, error) {
	return e.faults.PauseEtcd(ctx, d)
}

// Close stops cozy-aio, the control plane and the sources.
func (e *Env) Close() {
	if e.Cozy != nil {
		e.Cozy.Stop(20 * time.Second)
	}
	if e.faults != nil {
		e.faults.Close()
	}
	if e.CP != nil {
		_ = e.CP.Stop()
	}
	for _, g := range []*Gate{e.RegGate, e.GitGate} {
		if g != nil {
			g.Close()
		}
	}
	if e.Git != nil {
		e.Git.Close()
	}
	if e.Reg != nil {
		e.Reg.Close()
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randomString() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
