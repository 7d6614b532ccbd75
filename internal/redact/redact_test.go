package redact_test

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"testing"

	"github.com/cozystack/cozy-aio/internal/redact"
)

// stringCase is one rule at work: in must lose every secret and keep every
// piece of context.
type stringCase struct {
	name    string
	in      string
	secrets []string
	keep    []string
}

const pemKey = `-----BEGIN RSA PRIVATE KEY-----
MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun
VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK
-----END RSA PRIVATE KEY-----`

var stringCases = []stringCase{
	// URL userinfo, any scheme.
	{"https userinfo", "GET https://flux:s3cretpw@charts.example.com/index.yaml: 401 Unauthorized",
		[]string{"s3cretpw", "flux:"}, []string{"https://", "charts.example.com/index.yaml", "401 Unauthorized"}},
	{"token as user name", "git https://ghp_abc123XYZ@github.com/org/repo.git: authentication required",
		[]string{"ghp_abc123XYZ"}, []string{"github.com/org/repo.git", "authentication required"}},
	{"password with an unescaped @", "git https://user:p@ssw0rd@git.example.com/org/repo.git",
		[]string{"p@ss", "ssw0rd"}, []string{"git.example.com/org/repo.git"}},
	{"http userinfo", "Get http://admin:adminpw@10.0.0.5:8080/metrics: EOF",
		[]string{"adminpw"}, []string{"10.0.0.5:8080/metrics", "EOF"}},
	{"ssh userinfo", "git ssh://git:sshpassw0rd@git.example.com:2222/org/repo: handshake failed",
		[]string{"sshpassw0rd"}, []string{"git.example.com:2222/org/repo", "handshake failed"}},
	{"oci userinfo", `pull "oci://robot$ci:0ci-t0ken@registry.example.com/charts/app:1.0"`,
		[]string{"0ci-t0ken", "robot$ci"}, []string{"registry.example.com/charts/app:1.0"}},
	{"s3 userinfo", "bucket s3://AKIAEXAMPLE:wJalrXUtnFEMIexample@minio.example.com/bucket: denied",
		[]string{"AKIAEXAMPLE", "wJalrXUtnFEMIexample"}, []string{"minio.example.com/bucket", "denied"}},
	{"git userinfo", "clone git://u:gitpassw0rd@git.example.com/repo", []string{"gitpassw0rd"}, []string{"git.example.com/repo"}},
	{"socks5 userinfo", "proxyconnect tcp: socks5://proxyuser:proxypass@proxy.internal:1080: refused",
		[]string{"proxyuser", "proxypass"}, []string{"proxy.internal:1080", "refused"}},

	// Credential query parameters, any case.
	{"token parameter", "GET https://api.example.com/v1?token=tok123&page=2",
		[]string{"tok123"}, []string{"api.example.com/v1", "page=2"}},
	{"access_token parameter", "GET https://api.example.com/v1?page=2&Access_Token=tok456",
		[]string{"tok456"}, []string{"api.example.com/v1", "page=2"}},
	{"password parameter", "GET https://api.example.com/login?user=bob&PASSWORD=hunter22",
		[]string{"hunter22"}, []string{"api.example.com/login", "user=bob"}},
	{"client_secret parameter", "POST https://auth.example.com/token?client_id=app&client_secret=cs-999",
		[]string{"cs-999"}, []string{"auth.example.com/token", "client_id=app"}},
	{"Azure sig parameter", "GET https://acct.blob.core.windows.net/c/chart.tgz?sv=2022-11-02&sig=AzSig%2Bxyz%3D",
		[]string{"AzSig"}, []string{"acct.blob.core.windows.net/c/chart.tgz", "sv=2022-11-02"}},
	{"signature parameter", "GET https://cdn.example.com/a.tgz?Expires=1700000000&Signature=cdnSig123",
		[]string{"cdnSig123"}, []string{"cdn.example.com/a.tgz", "Expires=1700000000"}},
	{"key parameter", "POST https://chat.googleapis.com/v1/spaces/AAA/messages?key=AIzaKey123&token=gchatTok",
		[]string{"AIzaKey123", "gchatTok"}, []string{"chat.googleapis.com/v1/spaces/AAA/messages"}},
	{"api_key and apikey parameters", "GET https://api.example.com/?api_key=ak-1111&apikey=ak-2222&q=x",
		[]string{"ak-1111", "ak-2222"}, []string{"api.example.com", "q=x"}},
	{"S3 presigned URL", "GET https://bucket.s3.amazonaws.com/chart.tgz?X-Amz-Algorithm=AWS4-HMAC-SHA256" +
		"&X-Amz-Credential=AKIAEXAMPLE%2F20260101%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20260101T000000Z" +
		"&X-Amz-Security-Token=FwoGZXIvYXdzsessiontok&X-Amz-Signature=abcdef0123456789: 403 Forbidden",
		[]string{"AKIAEXAMPLE", "FwoGZXIvYXdzsessiontok", "abcdef0123456789"},
		[]string{"bucket.s3.amazonaws.com/chart.tgz", "X-Amz-Date=20260101T000000Z", "X-Amz-Algorithm=AWS4-HMAC-SHA256", "403 Forbidden"}},
	{"code and auth parameters", "GET https://app.example.com/callback?state=s1&code=oauthCode9&auth=authVal7",
		[]string{"oauthCode9", "authVal7"}, []string{"app.example.com/callback", "state=s1"}},

	// Bearer, Authorization and Basic.
	{"bearer token in prose", "request with Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig-part_x to api.example.com was refused",
		[]string{"eyJhbGciOiJIUzI1NiJ9", "sig-part_x"}, []string{"Bearer", "api.example.com was refused"}},
	{"Authorization header line", "POST /api/v1/statuses\nAuthorization: token ghp_gitea123\nContent-Type: application/json",
		[]string{"ghp_gitea123"}, []string{"Authorization:", "Content-Type: application/json"}},
	{"Authorization in a printed http.Header", "headers map[Authorization:[Bearer sekr1t-value] Content-Type:[application/json]]",
		[]string{"sekr1t-value"}, []string{"Content-Type:[application/json]"}},
	{"Proxy-Authorization header", "Proxy-Authorization: Basic cHJveHk6cHc=\r\nHost: example.com",
		[]string{"cHJveHk6cHc"}, []string{"Host: example.com"}},
	{"basic credentials", "sent Basic dXNlcjpodW50ZXIy to charts.example.com",
		[]string{"dXNlcjpodW50ZXIy"}, []string{"Basic", "to charts.example.com"}},

	// Kubeconfig and YAML/JSON key material.
	{"kubeconfig client-key-data", "users:\n- name: admin\n  user:\n    client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQo=\n",
		[]string{"LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQo"}, []string{"name: admin", "client-key-data:"}},
	{"kubeconfig client-certificate-data", "    client-certificate-data: LS0tLS1DRVJUSUZJQ0FURS0tLS0t\n    server: https://10.0.0.1:6443",
		[]string{"LS0tLS1DRVJUSUZJQ0FURS0tLS0t"}, []string{"server: https://10.0.0.1:6443"}},
	{"kubeconfig token", "clusters:\n- cluster:\n    server: https://10.0.0.1:6443\n  user:\n    token: kube-sa-token-123\n",
		[]string{"kube-sa-token-123"}, []string{"server: https://10.0.0.1:6443", "token:"}},
	{"kubeconfig password", "  user:\n    username: admin\n    password: \"kube pw\"\n",
		[]string{"kube pw"}, []string{"username: admin", "password:"}},
	{"key material in JSON", `{"server":"https://10.0.0.1:6443","token":"jsonTok3n","password":"jsonPassw0rd"}`,
		[]string{"jsonTok3n", "jsonPassw0rd"}, []string{`"server":"https://10.0.0.1:6443"`}},
	{"key=value text", "connect host=db.example.com password=kvpassw0rd sslmode=require",
		[]string{"kvpassw0rd"}, []string{"host=db.example.com", "sslmode=require"}},

	// Private keys.
	{"PEM RSA key", "ssh key for deploy:\n" + pemKey + "\nis invalid",
		[]string{"MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun", "VTLw7onLRnrq0"},
		[]string{"ssh key for deploy:", "-----BEGIN RSA PRIVATE KEY-----", "is invalid"}},
	{"PEM OpenSSH key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\nafter",
		[]string{"b3BlbnNzaC1rZXktdjEAAAAA"}, []string{"after"}},
	{"PEM key cut short", "yaml: line 3: -----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49",
		[]string{"MIGHAgEAMBMGByqGSM49AgEGCCqGSM49"}, []string{"yaml: line 3:"}},
	{"PGP key block", "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBGKpgpkeymaterial\n-----END PGP PRIVATE KEY BLOCK-----",
		[]string{"lQOYBGKpgpkeymaterial"}, []string{"PGP PRIVATE KEY BLOCK"}},
	{"age identity", "sops: AGE-SECRET-KEY-1QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ does not match",
		[]string{"1QQQQQQQQQQ"}, []string{"sops:", "does not match"}},

	// Webhook URLs whose path is the token.
	{"Slack webhook", `Post "https://hooks.slack.com/services/T0000/B0000/SlackSecretXYZ": EOF`,
		[]string{"SlackSecretXYZ", "T0000/B0000"}, []string{"hooks.slack.com", "EOF"}},
	{"Teams webhook", "https://contoso.webhook.office.com/webhookb2/1111@2222/IncomingWebhook/3333/TeamsSecret: 400",
		[]string{"TeamsSecret", "1111@2222"}, []string{"contoso.webhook.office.com", ": 400"}},
	{"Office 365 connector", "https://outlook.office.com/webhook/aaaa@bbbb/IncomingWebhook/cccc/OutlookSecret",
		[]string{"OutlookSecret"}, []string{"outlook.office.com"}},
	{"Teams workflow", "https://prod-01.westus.logic.azure.com:443/workflows/abc/triggers/manual/paths/invoke?api-version=2016-06-01&sp=%2Ftriggers&sv=1.0&sig=WorkflowSig",
		[]string{"WorkflowSig"}, []string{"prod-01.westus.logic.azure.com:443/workflows/abc", "api-version=2016-06-01"}},
	{"Discord webhook", "https://discord.com/api/webhooks/123456/DiscordSecretTok/slack: 404",
		[]string{"DiscordSecretTok"}, []string{"discord.com", ": 404"}},
	{"Mattermost webhook", "https://chat.example.com/hooks/xmattermostsecretx: 403",
		[]string{"xmattermostsecretx"}, []string{"chat.example.com", ": 403"}},
	{"Telegram bot", "https://api.telegram.org/bot123456:AAH-telegramSecret/sendMessage: 401",
		[]string{"AAH-telegramSecret"}, []string{"api.telegram.org", "/sendMessage"}},
}

func checkRedacted(t *testing.T, got string, c stringCase) {
	t.Helper()
	for _, s := range c.secrets {
		if strings.Contains(got, s) {
			t.Errorf("%q still holds %q", got, s)
		}
	}
	for _, k := range c.keep {
		if !strings.Contains(got, k) {
			t.Errorf("%q lost %q", got, k)
		}
	}
	if !strings.Contains(got, redact.Mask) {
		t.Errorf("%q holds no mask", got)
	}
}

func TestString(t *testing.T) {
	for _, c := range stringCases {
		t.Run(c.name, func(t *testing.T) {
			for _, s := range c.secrets {
				if !strings.Contains(c.in, s) {
					t.Fatalf("bad case: %q is not in the input", s)
				}
			}
			got := redact.String(c.in)
			checkRedacted(t, got, c)
			if again := redact.String(got); again != got {
				t.Errorf("not stable: %q, then %q", got, again)
			}
		})
	}
}

// TestStringKeepsText: text without a secret passes unchanged, so that the
// rules do not hide what an operator needs.
func TestStringKeepsText(t *testing.T) {
	for _, s := range []string{
		"git https://github.com/org/repo.git: authentication required",
		"git git@github.com:org/repo.git: knownhosts: key mismatch",
		"basic authentication failed",
		`Secret "flux-system/git" not found`,
		"GET https://charts.example.com/index.yaml?version=1.2.3&keyword=web: 404 Not Found",
		"https://teams.example.com/webhookb2/abc is an unknown host",
		"-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ\n-----END CERTIFICATE-----",
		"Kustomization/apps/web: health check failed after 5m0s",
	} {
		if got := redact.String(s); got != s {
			t.Errorf("String(%q) = %q", s, got)
		}
	}
}

func TestValues(t *testing.T) {
	secret := []byte("hunter2/x+y?")
	for _, c := range []struct{ name, in, form string }{
		{"raw", "login failed for hunter2/x+y? at db", "hunter2/x+y?"},
		{"base64", "data: aHVudGVyMi94K3k/ in the Secret", "aHVudGVyMi94K3k/"},
		{"base64 URL alphabet", "data: aHVudGVyMi94K3k_ in the Secret", "aHVudGVyMi94K3k_"},
		{"query-escaped", "GET /login?p=hunter2%2Fx%2By%3F failed", "hunter2%2Fx%2By%3F"},
		{"path-escaped", "GET /users/hunter2%2Fx+y%3F failed", "hunter2%2Fx+y%3F"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(c.in, c.form) {
				t.Fatalf("bad case: %q is not in %q", c.form, c.in)
			}
			got := redact.Values(c.in, []byte("unused-secret"), secret)
			if strings.Contains(got, c.form) || !strings.Contains(got, redact.Mask) {
				t.Errorf("Values = %q", got)
			}
			if before, _, _ := strings.Cut(c.in, c.form); !strings.HasPrefix(got, before) {
				t.Errorf("Values = %q lost the text before the secret", got)
			}
		})
	}
	padded := "Zm9vYmFy" // foobar, whose padded and raw forms are equal
	if got := redact.Values("x "+padded+" y", []byte("foobar")); got != "x *** y" {
		t.Errorf("Values(base64 foobar) = %q", got)
	}
	if got := redact.Values("a short pin 123 stays", []byte("123"), nil); got != "a short pin 123 stays" {
		t.Errorf("short values must be left, got %q", got)
	}
}

// TestError: every secret of the String cases is gone from the message of
// a wrapped error, and the chain is still there.
func TestError(t *testing.T) {
	for _, c := range stringCases {
		t.Run(c.name, func(t *testing.T) {
			inner := errors.New(c.in)
			err := redact.Error(fmt.Errorf("Kustomization/apps/web: %w", inner))
			checkRedacted(t, err.Error(), c)
			if !strings.HasPrefix(err.Error(), "Kustomization/apps/web: ") || !errors.Is(err, inner) {
				t.Errorf("lost the chain: %v", err)
			}
		})
	}
	if redact.Error(nil) != nil {
		t.Error("Error(nil) must be nil")
	}
}

// TestErrorDropsTransportURLs: a *url.Error's URL is dropped whatever its
// shape, since a generic webhook may hold its token anywhere in the path,
// and the values the caller names are masked.
func TestErrorDropsTransportURLs(t *testing.T) {
	ue := &url.Error{Op: "Post", URL: "https://hooks.example.com/generic/PathToken123/x", Err: io.ErrUnexpectedEOF}
	other := &url.Error{Op: "Get", URL: "https://other.example.com/OtherToken456", Err: io.EOF}
	err := redact.Error(fmt.Errorf("POST to provider address: %w", errors.Join(ue, other)), []byte("header-value-789"))
	msg := err.Error()
	for _, s := range []string{"PathToken123", "OtherToken456", "hooks.example.com"} {
		if strings.Contains(msg, s) {
			t.Errorf("%q still holds %q", msg, s)
		}
	}
	if !strings.Contains(msg, "POST to provider address: unexpected EOF") || !strings.Contains(msg, "EOF") {
		t.Errorf("message = %q", msg)
	}
	var got *url.Error
	if !errors.As(err, &got) || got != ue || !errors.Is(err, io.EOF) {
		t.Errorf("errors.As/Is lost the chain of %v", err)
	}
	err = redact.Error(fmt.Errorf("send: header %s refused", "header-value-789"), []byte("header-value-789"))
	if strings.Contains(err.Error(), "header-value-789") {
		t.Errorf("a value the caller names is kept: %v", err)
	}
}
