package egress_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cozystack/cozy-aio/internal/egress"
)

func TestCheck(t *testing.T) {
	allowLoop := egress.Policy{Allow: mustPrefixes(t, "127.0.0.0/8")}
	denyTen := egress.Policy{Deny: mustPrefixes(t, "10.0.0.0/8"), Allow: mustPrefixes(t, "10.1.0.0/16")}
	for _, tc := range []struct {
		name   string
		policy egress.Policy
		class  egress.Class
		addr   string
		refuse string // "" allowed; else a substring of the reason
	}{
		{"metadata v4", egress.Policy{}, egress.Endpoint, "169.254.169.254", "link-local"},
		{"metadata v4 for a source", egress.Policy{}, egress.Source, "169.254.169.254", "link-local"},
		{"metadata v6", egress.Policy{}, egress.Endpoint, "fd00:ec2::254", "metadata"},
		{"metadata v4-mapped", egress.Policy{}, egress.Endpoint, "::ffff:169.254.169.254", "link-local"},
		{"link-local v6 with zone", egress.Policy{}, egress.Source, "fe80::1%eth0", "link-local"},
		{"unspecified v4", egress.Policy{}, egress.Source, "0.0.0.0", "unspecified"},
		{"unspecified v6", egress.Policy{}, egress.Endpoint, "::", "unspecified"},
		{"loopback endpoint", egress.Policy{}, egress.Endpoint, "127.0.0.1", "loopback"},
		{"loopback elsewhere in 127/8", egress.Policy{}, egress.Endpoint, "127.1.2.3", "loopback"},
		{"loopback v6 endpoint", egress.Policy{}, egress.Endpoint, "::1", "loopback"},
		{"loopback source allowed", egress.Policy{}, egress.Source, "127.0.0.1", ""},
		{"public endpoint", egress.Policy{}, egress.Endpoint, "203.0.113.7", ""},
		{"private endpoint", egress.Policy{}, egress.Endpoint, "10.0.0.1", ""},
		{"loopback allowed by the operator", allowLoop, egress.Endpoint, "127.0.0.1", ""},
		{"allow does not open link-local", allowLoop, egress.Endpoint, "169.254.169.254", "link-local"},
		{"deny adds a range", denyTen, egress.Source, "10.2.0.1", "denied by the operator"},
		{"deny wins over allow", denyTen, egress.Source, "10.1.0.1", "denied by the operator"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.policy.Check(tc.class, netip.MustParseAddr(tc.addr))
			if tc.refuse == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			re, ok := egress.Refused(err)
			if !ok {
				t.Fatalf("allowed, want refused (%s)", tc.refuse)
			}
			if !strings.Contains(err.Error(), tc.refuse) || !strings.Contains(err.Error(), "destination policy") {
				t.Fatalf("message %q does not say %q and name the policy", err, tc.refuse)
			}
			if re.Class != tc.class {
				t.Fatalf("class %v, want %v", re.Class, tc.class)
			}
		})
	}
}

// countingListener counts the connections a refused dial must not make.
func countingListener(t *testing.T, addr string) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				n.Add(1)
			}
		}}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), &n
}

func TestDialerRefusesBeforeConnecting(t *testing.T) {
	addr, conns := countingListener(t, "127.0.0.1:0")
	d := egress.Policy{}.Dialer(egress.Endpoint, &net.Dialer{Timeout: time.Second})
	_, err := d.DialContext(context.Background(), "tcp", addr)
	if _, ok := egress.Refused(err); !ok {
		t.Fatalf("dial to %s: %v, want a refusal", addr, err)
	}
	// By name too: the check is on the resolved address.
	_, port, _ := net.SplitHostPort(addr)
	if _, err := d.DialContext(context.Background(), "tcp", net.JoinHostPort("localhost", port)); err == nil {
		t.Fatal("dial to localhost connected")
	}
	time.Sleep(50 * time.Millisecond)
	if n := conns.Load(); n != 0 {
		t.Fatalf("the listener saw %d connections, want 0", n)
	}
	allowed := egress.Policy{Allow: mustPrefixes(t, "127.0.0.1")}.Dialer(egress.Endpoint, nil)
	c, err := allowed.DialContext(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatalf("an allowed dial failed: %v", err)
	}
	c.Close()
}

// TestRedirectToRefusedAddress follows a redirect from an allowed address
// to a refused one: the client fails, and the refused listener sees no
// connection.
func TestRedirectToRefusedAddress(t *testing.T) {
	refused, conns := countingListener(t, "127.0.0.2:0")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://"+refused+"/hook", http.StatusFound)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })

	p := egress.Policy{Allow: mustPrefixes(t, "127.0.0.1/32")}
	c := &http.Client{Transport: &http.Transport{DialContext: p.Dialer(egress.Endpoint, nil).DialContext}}
	resp, err := c.Get("http://" + ln.Addr().String() + "/")
	if err == nil {
		resp.Body.Close()
		t.Fatal("the redirect to a refused address was followed")
	}
	var re *egress.RefusedError
	if !errors.As(err, &re) || re.Addr != netip.MustParseAddr("127.0.0.2") {
		t.Fatalf("error %v, want the refusal of 127.0.0.2", err)
	}
	if n := conns.Load(); n != 0 {
		t.Fatalf("the refused listener saw %d connections, want 0", n)
	}
}

func TestCheckURL(t *testing.T) {
	ctx := context.Background()
	p := egress.Policy{}
	for raw, refused := range map[string]bool{
		"https://169.254.169.254/latest/meta-data": true,
		"169.254.169.254:443":                      true,
		"https://[fd00:ec2::254]:443":              true,
		"https://localhost:6443":                   true,
		"http://user:pw@127.0.0.1:9090/x":          true,
		"https://203.0.113.9":                      false,
		"https://no-such-host.invalid":             false, // fails on its own when dialled
	} {
		err := p.CheckURL(ctx, egress.Endpoint, raw)
		if _, ok := egress.Refused(err); ok != refused {
			t.Errorf("CheckURL(%q) = %v, want refused=%v", raw, err, refused)
		}
		if err != nil && strings.Contains(err.Error(), "pw") {
			t.Errorf("CheckURL(%q) quotes the password: %v", raw, err)
		}
	}
}

func TestParsePrefixes(t *testing.T) {
	got, err := egress.ParsePrefixes(" 127.0.0.0/8, ::1 ,10.1.2.3,")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"127.0.0.0/8", "::1/128", "10.1.2.3/32"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	if _, err := egress.ParsePrefixes("not-a-range"); err == nil {
		t.Fatal("a bad range parsed")
	}
}

func mustPrefixes(t *testing.T, s string) []netip.Prefix {
	t.Helper()
	p, err := egress.ParsePrefixes(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
