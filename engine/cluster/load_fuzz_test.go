package cluster_test

import (
	"testing"

	"github.com/cozystack/cozy-aio/engine/cluster"
)

// FuzzLoad feeds arbitrary kubeconfigs to Load. It must never panic, and
// what it accepts must carry nothing that it refuses: no exec plugin, no
// disabled TLS verification unless allowed, and no file path ever.
func FuzzLoad(f *testing.F) {
	for _, k := range []kubeconfig{
		{cluster: caData, user: tokenUser},
		{user: "    client-certificate-data: Q0VSVA==\n    client-key-data: S0VZ\n"},
		{user: "    username: u\n    password: p\n"},
		{user: execUser},
		{cluster: insecure, user: tokenUser},
		{user: tokenUser, users: otherUser(execUser)},
		{user: "    auth-provider:\n      name: oidc\n"},
		{user: "    tokenFile: /token\n"},
		{user: "    client-certificate: /c\n    client-key: /k\n"},
		{cluster: "    certificate-authority: /ca\n", user: tokenUser},
		{cluster: "    proxy-url: socks5://p:1080\n    tls-server-name: x\n", user: tokenUser + "    as: root\n"},
	} {
		f.Add(k.bytes(), false, false)
		f.Add(k.bytes(), true, true)
	}
	f.Add([]byte(`{"apiVersion":"v1","kind":"Config","current-context":"c","contexts":[{"name":"c","context":{"cluster":"x","user":"u"}}],"clusters":[{"name":"x","cluster":{"server":"https://x"}}]}`), false, false)
	f.Add([]byte(""), false, false)
	f.Fuzz(func(t *testing.T, data []byte, allowExec, allowInsecure bool) {
		c, err := cluster.Load(data, cluster.LoadOptions{AllowExec: allowExec, AllowInsecureTLS: allowInsecure})
		if err != nil {
			if c != nil {
				t.Fatalf("Load returned a config with error %v", err)
			}
			return
		}
		if c.ExecProvider != nil && !allowExec {
			t.Fatalf("accepted an exec plugin: %+v", c.ExecProvider)
		}
		if c.Insecure && !allowInsecure {
			t.Fatal("accepted insecure-skip-tls-verify")
		}
		if c.CAFile != "" || c.CertFile != "" || c.KeyFile != "" || c.BearerTokenFile != "" {
			t.Fatalf("accepted a file path: CAFile=%q CertFile=%q KeyFile=%q BearerTokenFile=%q",
				c.CAFile, c.CertFile, c.KeyFile, c.BearerTokenFile)
		}
		if c.AuthProvider != nil || c.Impersonate.UserName != "" || c.WrapTransport != nil || c.Host == "" {
			t.Fatalf("accepted config not sanitised: %+v", c)
		}
	})
}
