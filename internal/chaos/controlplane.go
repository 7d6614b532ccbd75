package chaos

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cozystack/cozy-aio/internal/demo"

	corev1 "k8s.io/api/core/v1"
	kwait "k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// controlPlaneFaults restarts the kube-apiserver and pauses the etcd that
// envtest started as this process's children (internal/testenv). A
// restarted kube-apiserver runs with the same command line, certificates
// and port, so clients keep their kubeconfigs; it is this harness's to
// stop.
type controlPlaneFaults struct {
	c    client.Client
	logs string
	// apiserver is the kube-apiserver this harness started, nil while
	// envtest's runs.
	apiserver *exec.Cmd
	apiDone   chan struct{}
}

// childPID finds the running child of this process whose executable is
// named name.
func childPID(name string) (int, error) {
	if pid, ok := demo.ChildProcesses()[name]; ok {
		return pid, nil
	}
	return 0, fmt.Errorf("no running %s child of process %d", name, os.Getpid())
}

// RestartAPIServer kills kube-apiserver with SIGKILL (mid-request, as a
// crash or a node reboot), starts it again with the same command line,
// and returns once it answers, with when it was killed.
func (f *controlPlaneFaults) RestartAPIServer(ctx context.Context) (time.Time, error) {
	var args []string
	var dir string
	if f.apiserver != nil {
		args, dir = f.apiserver.Args, f.apiserver.Dir
	} else {
		pid, err := childPID("kube-apiserver")
		if err != nil {
			return time.Time{}, err
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			return time.Time{}, err
		}
		args = strings.Split(string(bytes.TrimRight(raw, "\x00")), "\x00")
		if dir, err = os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err != nil {
			return time.Time{}, err
		}
	}
	at := time.Now()
	if err := f.killAPIServer(); err != nil {
		return at, err
	}
	// The killed server's port may stay taken a moment (or be caught by
	// another process): wait for it, and start again if the new server
	// exits before it answers.
	port := ""
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--secure-port="); ok {
			port = v
		}
	}
	var err error
	for attempt := 0; attempt < 10; attempt++ {
		if port != "" {
			waitPortFree("127.0.0.1:"+port, 30*time.Second)
		}
		if err = f.startAPIServer(args, dir); err != nil {
			return at, err
		}
		if err = f.waitAPI(ctx); err == nil {
			return at, nil
		}
		if !isClosed(f.apiDone) {
			return at, err
		}
		f.apiserver = nil
		time.Sleep(time.Second)
	}
	return at, fmt.Errorf("kube-apiserver did not come back: %w (log: %s)", err, filepath.Join(f.logs, "kube-apiserver-restarted.log"))
}

func (f *controlPlaneFaults) startAPIServer(args []string, dir string) error {
	log, err := os.OpenFile(filepath.Join(f.logs, "kube-apiserver-restarted.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("restarting kube-apiserver: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); log.Close(); close(done) }()
	f.apiserver, f.apiDone = cmd, done
	return nil
}

func waitPortFree(addr string, d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		l, err := net.Listen("tcp", addr)
		if err == nil {
			l.Close()
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// killAPIServer kills the running kube-apiserver and waits for its port.
func (f *controlPlaneFaults) killAPIServer() error {
	if f.apiserver != nil {
		_ = f.apiserver.Process.Signal(syscall.SIGKILL)
		<-f.apiDone
		f.apiserver = nil
		return nil
	}
	pid, err := childPID("kube-apiserver")
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return err
	}
	// envtest's goroutine reaps it.
	return kwait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, err := childPID("kube-apiserver")
		return err != nil, nil
	})
}

// waitAPI returns once the API server serves a list, or with an error
// when the server it started exited.
func (f *controlPlaneFaults) waitAPI(ctx context.Context) error {
	return kwait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if f.apiserver != nil && isClosed(f.apiDone) {
			return false, fmt.Errorf("kube-apiserver exited")
		}
		var ns corev1.NamespaceList
		return f.c.List(ctx, &ns, client.Limit(1)) == nil, nil
	})
}

// PauseEtcd stops etcd with SIGSTOP for d, then resumes it with SIGCONT:
// the API server's requests to it hang and time out meanwhile, as with a
// stalled disk or a partitioned member. It returns when etcd was resumed.
func (f *controlPlaneFaults) PauseEtcd(ctx context.Context, d time.Duration) (time.Time, error) {
	pid, err := childPID("etcd")
	if err != nil {
		return time.Time{}, err
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return time.Time{}, err
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		return time.Time{}, err
	}
	return time.Now(), nil
}

// Close stops a kube-apiserver this harness started; envtest stops its own.
func (f *controlPlaneFaults) Close() {
	if f.apiserver != nil {
		_ = f.apiserver.Process.Signal(syscall.SIGTERM)
		select {
		case <-f.apiDone:
		case <-time.After(20 * time.Second):
			_ = f.apiserver.Process.Signal(syscall.SIGKILL)
			<-f.apiDone
		}
		f.apiserver = nil
	}
}
