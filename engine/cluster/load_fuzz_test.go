package cluster_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cozystack/cozy-aio/engine/cluster"
)

// FuzzLoad feeds arbitrary kubeconfigs to Load and judges each answer
// against its own reading of the input with client-go's parser, not
// against Load's code: a file holding a refused field anywhere (an exec
// plugin unless allowed, an auth-provider, a file path, disabled TLS
// verification unless allowed) must be refused with a *FieldError naming
// one of them; a clean file that client-go accepts must load; and what
// loads carries nothing refused and the current context's server and
// credentials.
func FuzzLoad(f *testing.F) {
	for _, k := range []kubeconfig{
		{cluster: caData, user: tokenUser},
		{user: "    client-certificate-data: Q0VSVA==\n    client-key-data: S0VZ\n"},
		{user: "    username: u\n    password: p\n"},
		{user: execUser},
		{cluster: insecure, user: tokenUser},
		{user: tokenUser, users: otherUser(execUser)},
		{user: tokenUser, clusters: otherCluster(insecure)},
		{user: "    auth-provider:\n      name: oidc\n"},
		{user: tokenUser, users: otherUser("    auth-provider:\n      name: oidc\n")},
		{user: "    tokenFile: /token\n"},
		{user: "    client-certificate: /c\n    client-key-data: S0VZ\n"},
		{user: "    client-certificate-data: Q0VSVA==\n    client-key: /k\n"},
		{user: tokenUser, users: otherUser("    client-key: /k\n")},
		{cluster: "    certificate-authority: /ca\n", user: tokenUser},
		{user: tokenUser, clusters: otherCluster("    certificate-authority: /ca\n")},
		{cluster: "    proxy-url: socks5://p:1080\n    tls-server-name: x\n", user: tokenUser + "    as: root\n"},
		{cluster: "    server: https://other.example.com/base?q=1\n", user: tokenUser},
	} {
		for _, allow := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
			f.Add(k.bytes(), allow[0], allow[1])
		}
	}
	f.Add([]byte(`{"apiVersion":"v1","kind":"Config","current-context":"c","contexts":[{"name":"c","context":{"cluster":"x","user":"u"}}],"clusters":[{"name":"x","cluster":{"server":"https://x"}}]}`), false, false)
	f.Add([]byte(`{"apiVersion":"v1","kind":"Config","current-context":"c","contexts":[{"name":"c","context":{"cluster":"x","user":"u"}}],"clusters":[{"name":"x","cluster":{"server":"https://x"}}],"users":[{"name":"u","user":{"exec":{"command":"id","apiVersion":"client.authentication.k8s.io/v1"}}}]}`), false, true)
	f.Add([]byte("apiVersion: v1\nkind: Config\nclusters:\n- name: x\n  cluster: {server: https://x, insecure-skip-tls-verify: true}\n"), false, false)
	f.Add([]byte(""), false, false)
	f.Fuzz(func(t *testing.T, data []byte, allowExec, allowInsecure bool) {
		opts := cluster.LoadOptions{AllowExec: allowExec, AllowInsecureTLS: allowInsecure}
		c, err := cluster.Load(data, opts)
		if err != nil && c != nil {
			t.Fatalf("Load returned a config with error %v", err)
		}
		cfg, perr := clientcmd.Load(data)
		if perr != nil || len(bytes.TrimSpace(data)) == 0 || cfg.CurrentContext == "" {
			if err == nil {
				t.Fatalf("Load accepted a kubeconfig that client-go does not parse or that has no current-context (%v)", perr)
			}
			return
		}
		if refused := refusedFields(cfg, opts); len(refused) > 0 {
			var fe *cluster.FieldError
			if !errors.As(err, &fe) || !slices.Contains(refused, fe.Field) {
				t.Fatalf("the kubeconfig holds %v: Load returned %v, want a *FieldError naming one of them", refused, err)
			}
			return
		}
		// Nothing is refused, so nothing names a file: client-go's own
		// ClientConfig reads none and says what the current context is.
		want, werr := clientcmd.NewDefaultClientConfig(*cfg, &clientcmd.ConfigOverrides{}).ClientConfig()
		if (err == nil) != (werr == nil) {
			t.Fatalf("Load: %v; client-go's ClientConfig of the same clean kubeconfig: %v", err, werr)
		}
		if err == nil {
			checkLoaded(t, c, want, cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo], opts)
		}
	})
}

// refusedFields lists every field of cfg that Load must refuse under
// opts, by the paths FieldError uses.
func refusedFields(cfg *clientcmdapi.Config, opts cluster.LoadOptions) []string {
	var out []string
	for name, c := range cfg.Clusters {
		p := "clusters[" + name + "]"
		if c == nil {
			out = append(out, p)
			continue
		}
		if c.CertificateAuthority != "" {
			out = append(out, p+".certificate-authority")
		}
		if c.InsecureSkipTLSVerify && !opts.AllowInsecureTLS {
			out = append(out, p+".insecure-skip-tls-verify")
		}
	}
	for name, u := range cfg.AuthInfos {
		p := "users[" + name + "]"
		if u == nil {
			out = append(out, p)
			continue
		}
		for field, set := range map[string]bool{
			".exec":               u.Exec != nil && !opts.AllowExec,
			".auth-provider":      u.AuthProvider != nil,
			".tokenFile":          u.TokenFile != "",
			".client-certificate": u.ClientCertificate != "",
			".client-key":         u.ClientKey != "",
		} {
			if set {
				out = append(out, p+field)
			}
		}
	}
	return out
}

// checkLoaded compares what Load returned with what client-go makes of the
// same clean kubeconfig (want), of whose current context user is the user.
func checkLoaded(t *testing.T, got, want *rest.Config, user *clientcmdapi.AuthInfo, opts cluster.LoadOptions) {
	t.Helper()
	if got.Host != want.Host || got.Host == "" {
		t.Fatalf("Host = %q, want the current context's server %q", got.Host, want.Host)
	}
	if got.BearerToken != want.BearerToken || !bytes.Equal(got.CAData, want.CAData) ||
		!bytes.Equal(got.CertData, want.CertData) || !bytes.Equal(got.KeyData, want.KeyData) {
		t.Fatal("the credentials of the current context were not carried over")
	}
	if got.ExecProvider != nil && (!opts.AllowExec || user == nil || user.Exec == nil) {
		t.Fatalf("carries an exec plugin: %+v", got.ExecProvider)
	}
	if got.Insecure && (!opts.AllowInsecureTLS || !want.Insecure) {
		t.Fatal("carries insecure-skip-tls-verify")
	}
	if got.CAFile != "" || got.CertFile != "" || got.KeyFile != "" || got.BearerTokenFile != "" {
		t.Fatalf("carries a file path: CAFile=%q CertFile=%q KeyFile=%q BearerTokenFile=%q",
			got.CAFile, got.CertFile, got.KeyFile, got.BearerTokenFile)
	}
	if got.AuthProvider != nil || got.Impersonate.UserName != "" || len(got.Impersonate.Groups) > 0 || got.WrapTransport != nil {
		t.Fatalf("carries an auth-provider, impersonation or a transport wrapper: %+v", got)
	}
}
