package engine

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cozystack/cozy-aio/apply/helm"
	"github.com/cozystack/cozy-aio/engine/internal/frame"
)

// TestAPIUnavailable: the error Helm's storage returned while
// kube-apiserver restarted (internal/chaos, seed 42: "helm recover ...:
// query: failed to query with labels: Get ...: connect: connection
// refused") is one the API server did not answer; a refusal is not.
func TestAPIUnavailable(t *testing.T) {
	refused := &url.Error{Op: "Get", URL: "https://127.0.0.1:1/api/v1/secrets", Err: &net.OpError{
		Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	seen := &helm.Error{Release: "t/app", Action: helm.ActionRecover, Err: fmt.Errorf("query: failed to query with labels: %w", refused)}
	if !frame.APIUnavailable(fmt.Errorf("HelmRelease/t/app: %w", seen)) {
		t.Fatalf("%v: not taken for the API server not answering", seen)
	}
	if !frame.APIUnavailable(apierrors.NewServiceUnavailable("etcd")) {
		t.Fatal("503 not taken for the API server not answering")
	}
	for _, err := range []error{
		apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "a_b", nil),
		apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "x", errors.New("no")),
		errors.New("chart render failed"),
	} {
		if frame.APIUnavailable(err) {
			t.Fatalf("%v taken for the API server not answering", err)
		}
	}
}
