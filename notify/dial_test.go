package notify

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingServer is a real HTTP server that counts the connections its
// listener accepts.
func countingServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			n.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &n
}

var errRefused = errors.New("refused by the destination policy")

// policy is a dial hook that refuses the addresses in refused and records
// every address it is asked for.
type policy struct {
	refused []string
	mu      sync.Mutex
	asked   []string
}

func (p *policy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	p.mu.Lock()
	p.asked = append(p.asked, addr)
	p.mu.Unlock()
	for _, r := range p.refused {
		if addr == r {
			return nil, fmt.Errorf("dial %s: %w", addr, errRefused)
		}
	}
	return (&net.Dialer{}).DialContext(ctx, network, addr)
}

func sendWith(t *testing.T, p Provider, dial dialFunc) error {
	t.Helper()
	s, err := newSender(p, dial)
	if err != nil {
		t.Fatal(err)
	}
	return s.post(context.Background(), sampleEvent())
}

func TestDialHookRefusesTheAddress(t *testing.T) {
	srv, conns := countingServer(t, func(http.ResponseWriter, *http.Request) {})
	addr := srv.Listener.Addr().String()
	p := Provider{Type: TypeGeneric, Address: srv.URL + "/hook/PathSecret", Timeout: 5 * time.Second}

	allow := &policy{}
	if err := sendWith(t, p, allow.dial); err != nil || conns.Load() != 1 || len(allow.asked) != 1 || allow.asked[0] != addr {
		t.Fatalf("an allowed address: err %v, %d connections, asked %v", err, conns.Load(), allow.asked)
	}
	deny := &policy{refused: []string{addr}}
	err := sendWith(t, p, deny.dial)
	if !errors.Is(err, errRefused) || !strings.HasPrefix(err.Error(), "POST to provider address: ") ||
		!strings.Contains(err.Error(), addr+": refused by the destination policy") || strings.Contains(err.Error(), "PathSecret") {
		t.Fatalf("a refused address: %v", err)
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("the refused address got a connection (%d in all)", n)
	}
}

// TestDialHookDialsTheProxy: with spec.proxy, the hook is asked for the
// proxy's address, the one a connection goes to, and can refuse it.
func TestDialHookDialsTheProxy(t *testing.T) {
	target, targetConns := countingServer(t, func(http.ResponseWriter, *http.Request) {})
	var proxied atomic.Value
	proxy, proxyConns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		proxied.Store(r.URL.String())
	})
	proxyURL, _ := url.Parse(proxy.URL)
	proxyURL.User = url.UserPassword("u", "proxyPassw0rd")
	proxyAddr := proxy.Listener.Addr().String()
	p := Provider{Type: TypeGeneric, Address: target.URL + "/hook", Proxy: proxyURL, Timeout: 5 * time.Second}

	allow := &policy{}
	if err := sendWith(t, p, allow.dial); err != nil {
		t.Fatal(err)
	}
	if len(allow.asked) != 1 || allow.asked[0] != proxyAddr || proxied.Load() != target.URL+"/hook" || proxyConns.Load() != 1 {
		t.Fatalf("asked %v, proxied %v, %d proxy connections", allow.asked, proxied.Load(), proxyConns.Load())
	}
	deny := &policy{refused: []string{proxyAddr}}
	err := sendWith(t, p, deny.dial)
	if !errors.Is(err, errRefused) || !strings.Contains(err.Error(), "refused by the destination policy") || strings.Contains(err.Error(), "proxyPassw0rd") {
		t.Fatalf("a refused proxy: %v", err)
	}
	if proxyConns.Load() != 1 || targetConns.Load() != 0 {
		t.Fatalf("connections after the refusal: proxy %d, target %d", proxyConns.Load(), targetConns.Load())
	}
}

func TestDispatcherDialsWithTheHook(t *testing.T) {
	srv, conns := countingServer(t, func(http.ResponseWriter, *http.Request) {})
	deny := &policy{refused: []string{srv.Listener.Addr().String()}}
	d, rep := startDispatcher(t, DispatcherOptions{Dial: deny.dial, Backoff: time.Millisecond, Retries: 1})
	_ = d.SetProvider(provRef, Provider{Type: TypeSlack, Address: srv.URL, Token: "xoxb-1"})
	d.Record(sampleEvent(), nil)
	if dl := rep.next(t); !errors.Is(dl.Err, errRefused) || dl.Attempts != 2 || conns.Load() != 0 {
		t.Fatalf("delivery %+v, %d connections", dl, conns.Load())
	}
}

// TestStatusErrorKeepsNoBody: a failed answer is reported as its code;
// the body, which a tenant's endpoint chooses and may fill with the
// request's token, is dropped.
func TestStatusErrorKeepsNoBody(t *testing.T) {
	for _, code := range []int{http.StatusInternalServerError, http.StatusBadRequest} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "echo: "+r.Header.Get("Authorization"), code)
		}))
		err := send(t, Provider{Type: TypeSlack, Address: srv.URL, Token: "xoxb-secret-token"})
		srv.Close()
		want := fmt.Sprintf("POST to provider address: provider answered %d %s", code, http.StatusText(code))
		var se *StatusError
		if !errors.As(err, &se) || se.Code != code || err.Error() != want {
			t.Errorf("%d: got %v, want %q", code, err, want)
		}
	}
}
