package targets

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cozystack/cozy-aio/apply/helm"
)

// TestRemoteError: the failures of talking to a remote cluster name its
// Secret and keep their kind; the others, and the local cluster's, are
// left as they are.
func TestRemoteError(t *testing.T) {
	const secret = "Secret ns/tenant"
	untrusted := &url.Error{Op: "Get", URL: "https://10.0.0.1/api", Err: errors.New("tls: failed to verify certificate: x509: certificate signed by unknown authority")}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "", errors.New("no RBAC"))
	helmErr := func(err error) error {
		return &helm.Error{Release: "addons/app", Action: helm.ActionRecover, Err: fmt.Errorf("query: failed to query with labels: %w", err)}
	}
	cases := []struct {
		name, source string
		err          error
		named        bool
	}{
		{"untrusted certificate", secret, helmErr(untrusted), true},
		{"401", secret, helmErr(apierrors.NewUnauthorized("Unauthorized")), true},
		{"403", secret, helmErr(forbidden), true},
		{"flattened by Helm", secret, fmt.Errorf("unable to build kubernetes objects from release manifest: %v",
			errors.New(`unable to recognize "": Get "https://127.0.0.1:40937/api?timeout=30s": dial tcp 127.0.0.1:40937: connect: connection refused`)), true},
		{"chart template", secret, errors.New("template: demo/templates/cm.yaml:3: bad"), false},
		{"invalid object", secret, apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "a_b", nil), false},
		{"this cluster", "", helmErr(forbidden), false},
		{"nil", secret, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := RemoteError(c.source, c.err)
			if named := got != nil && strings.HasPrefix(got.Error(), "cluster "+secret+": "); named != c.named {
				t.Fatalf("remoteError(%q, %v) = %v; named the Secret: %v, want %v", c.source, c.err, got, named, c.named)
			}
			if c.err != nil && !errors.Is(got, c.err) {
				t.Fatalf("remoteError lost %v", c.err)
			}
		})
	}
}
