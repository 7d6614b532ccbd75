package cluster_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/cozystack/cozy-aio/engine/cluster"
)

// kubeconfig is a kubeconfig whose current context uses the cluster "prod"
// and the user "admin".
type kubeconfig struct {
	cluster  string // lines added to cluster prod
	user     string // lines of user admin
	clusters string // entries added to clusters
	users    string // entries added to users
}

func (k kubeconfig) bytes() []byte {
	return []byte(`apiVersion: v1
kind: Config
current-context: prod
contexts:
- name: prod
  context: {cluster: prod, user: admin}
clusters:
- name: prod
  cluster:
    server: https://prod.example.com:6443
` + k.cluster + k.clusters + `users:
- name: admin
  user:
` + k.user + k.users)
}

const (
	caData    = "    certificate-authority-data: Q0EtREFUQQ==\n" // CA-DATA
	tokenUser = "    token: secret-token\n"
	execUser  = "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh\n      args: [-c, id]\n      interactiveMode: Never\n"
	insecure  = "    insecure-skip-tls-verify: true\n"
)

// otherUser is a user entry that no context uses.
func otherUser(lines string) string { return "- name: other\n  user:\n" + lines }

// otherCluster is a cluster entry that no context uses.
func otherCluster(lines string) string {
	return "- name: other\n  cluster:\n    server: https://other.example.com\n" + lines
}

func TestLoadAccepts(t *testing.T) {
	cases := []struct {
		name  string
		in    kubeconfig
		check func(t *testing.T, c *rest.Config)
	}{
		{"token", kubeconfig{cluster: caData, user: tokenUser}, func(t *testing.T, c *rest.Config) {
			want(t, "BearerToken", c.BearerToken, "secret-token")
			want(t, "CAData", string(c.CAData), "CA-DATA")
		}},
		{"client certificate", kubeconfig{cluster: caData, user: "    client-certificate-data: Q0VSVA==\n    client-key-data: S0VZ\n"},
			func(t *testing.T, c *rest.Config) {
				want(t, "CertData", string(c.CertData), "CERT")
				want(t, "KeyData", string(c.KeyData), "KEY")
			}},
		{"basic auth", kubeconfig{user: "    username: u\n    password: p\n"}, func(t *testing.T, c *rest.Config) {
			want(t, "Username", c.Username, "u")
			want(t, "Password", c.Password, "p")
		}},
		{"tls-server-name and proxy-url", kubeconfig{cluster: "    tls-server-name: api.internal\n    proxy-url: http://proxy:3128\n", user: tokenUser},
			func(t *testing.T, c *rest.Config) {
				want(t, "ServerName", c.ServerName, "api.internal")
				if c.Proxy == nil {
					t.Error("Proxy was dropped")
				}
			}},
		{"impersonation is dropped", kubeconfig{user: tokenUser + "    as: system:admin\n    as-groups: [system:masters]\n"},
			func(t *testing.T, c *rest.Config) {
				if c.Impersonate.UserName != "" || len(c.Impersonate.Groups) > 0 {
					t.Errorf("Impersonate = %+v, want none", c.Impersonate)
				}
			}},
		{"exec when allowed", kubeconfig{user: execUser}, func(t *testing.T, c *rest.Config) {
			if c.ExecProvider == nil || c.ExecProvider.Command != "/bin/sh" {
				t.Errorf("ExecProvider = %+v, want /bin/sh", c.ExecProvider)
			}
		}},
		{"insecure TLS when allowed", kubeconfig{cluster: insecure, user: tokenUser}, func(t *testing.T, c *rest.Config) {
			if !c.Insecure {
				t.Error("Insecure = false, want true")
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := cluster.LoadOptions{UserAgent: "cozy-aio/test", AllowExec: true, AllowInsecureTLS: true}
			if !strings.Contains(tc.name, "allowed") {
				opts.AllowExec, opts.AllowInsecureTLS = false, false
			}
			c, err := cluster.Load(tc.in.bytes(), opts)
			if err != nil {
				t.Fatal(err)
			}
			want(t, "Host", c.Host, "https://prod.example.com:6443")
			want(t, "UserAgent", c.UserAgent, "cozy-aio/test")
			if c.Timeout != 30*time.Second || c.QPS != 50 || c.Burst != 100 {
				t.Errorf("Timeout, QPS, Burst = %v, %v, %v; want 30s, 50, 100", c.Timeout, c.QPS, c.Burst)
			}
			tc.check(t, c)
		})
	}
}

func want(t *testing.T, field, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %q, want %q", field, got, want)
	}
}

func TestLoadTimeout(t *testing.T) {
	for _, tc := range []struct{ in, want time.Duration }{
		{0, 30 * time.Second}, {5 * time.Second, 5 * time.Second}, {-1, 0},
	} {
		c, err := cluster.Load(kubeconfig{user: tokenUser}.bytes(), cluster.LoadOptions{Timeout: tc.in})
		if err != nil {
			t.Fatal(err)
		}
		if c.Timeout != tc.want {
			t.Errorf("Timeout %v gave %v, want %v", tc.in, c.Timeout, tc.want)
		}
	}
}

func TestLoadRefusesField(t *testing.T) {
	all := cluster.LoadOptions{AllowExec: true, AllowInsecureTLS: true}
	cases := []struct {
		name  string
		in    kubeconfig
		opts  cluster.LoadOptions
		field string
	}{
		{"exec", kubeconfig{user: execUser}, cluster.LoadOptions{AllowInsecureTLS: true}, "users[admin].exec"},
		{"exec of an unused user", kubeconfig{user: tokenUser, users: otherUser(execUser)}, cluster.LoadOptions{}, "users[other].exec"},
		{"auth-provider", kubeconfig{user: "    auth-provider:\n      name: oidc\n      config: {idp-issuer-url: https://idp}\n"},
			all, "users[admin].auth-provider"},
		{"tokenFile", kubeconfig{user: "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token\n"},
			all, "users[admin].tokenFile"},
		{"client-certificate", kubeconfig{user: "    client-certificate: /etc/kubernetes/pki/admin.crt\n    client-key-data: S0VZ\n"},
			all, "users[admin].client-certificate"},
		{"client-key", kubeconfig{user: "    client-certificate-data: Q0VSVA==\n    client-key: /etc/kubernetes/pki/admin.key\n"},
			all, "users[admin].client-key"},
		{"certificate-authority", kubeconfig{cluster: "    certificate-authority: /etc/kubernetes/pki/ca.crt\n", user: tokenUser},
			all, "clusters[prod].certificate-authority"},
		{"certificate-authority of an unused cluster", kubeconfig{user: tokenUser, clusters: otherCluster("    certificate-authority: /ca.crt\n")},
			all, "clusters[other].certificate-authority"},
		{"insecure-skip-tls-verify", kubeconfig{cluster: insecure, user: tokenUser}, cluster.LoadOptions{AllowExec: true},
			"clusters[prod].insecure-skip-tls-verify"},
		{"insecure-skip-tls-verify of an unused cluster", kubeconfig{user: tokenUser, clusters: otherCluster(insecure)},
			cluster.LoadOptions{}, "clusters[other].insecure-skip-tls-verify"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cluster.Load(tc.in.bytes(), tc.opts)
			var fe *cluster.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want a *FieldError", err)
			}
			if fe.Field != tc.field {
				t.Errorf("Field = %q, want %q (err: %v)", fe.Field, tc.field, err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("message %q does not name the field", err)
			}
		})
	}
}

func TestLoadRefusesFile(t *testing.T) {
	cases := []struct{ name, yaml, msg string }{
		{"empty", "", "kubeconfig is empty"},
		{"blank", " \n\t\n", "kubeconfig is empty"},
		{"not YAML", "{{{", "parsing kubeconfig"},
		{"no current-context", "apiVersion: v1\nkind: Config\nclusters: []\n", "no current-context"},
		{"missing context", "apiVersion: v1\nkind: Config\ncurrent-context: gone\n", `current-context "gone"`},
		{"cluster without server", strings.Replace(string(kubeconfig{user: tokenUser}.bytes()),
			"    server: https://prod.example.com:6443\n", "", 1), `current-context "prod"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cluster.Load([]byte(tc.yaml), cluster.LoadOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want one containing %q", err, tc.msg)
			}
		})
	}
}

func TestLoadErrorHoldsNoSecret(t *testing.T) {
	in := kubeconfig{user: tokenUser, users: otherUser("    token: other-secret\n" + execUser)}
	_, err := cluster.Load(in.bytes(), cluster.LoadOptions{})
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("err = %v, want a refusal that shows no token", err)
	}
}
