package git

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"golang.org/x/net/proxy"
)

// go-git v5 takes its transports from a process-wide table
// (client.Protocols) and has no per-call transport or dialer; its SSH
// transport dials through golang.org/x/net/proxy, the only hook it has. So
// each go-git call gets a connector, registered under an id and named by
// the call's proxy option, "cozy-aio-dial://<id>":
//
//   - over SSH, go-git hands that URL to x/net/proxy, which calls the
//     connector registered for the scheme;
//   - over HTTP(S), the transport installed below in go-git's table finds
//     the connector and serves the call with an http.Transport of the
//     connector's own, whose DialContext is the Dial hook.
//
// One fetch's hook thus never reaches another fetch's connections. Should
// the installed transport be replaced, go-git would take the name for a
// proxy it cannot reach and fail, not dial without the hook; connect
// refuses the call before that.
const dialScheme = "cozy-aio-dial"

func init() {
	// At init, before any goroutine reads these tables.
	proxy.RegisterDialerType(dialScheme, func(u *url.URL, _ proxy.Dialer) (proxy.Dialer, error) {
		c, err := lookup(u)
		if err != nil {
			return nil, err
		}
		return sshDialer{c}, nil
	})
	for _, scheme := range []string{"http", "https"} {
		client.InstallProtocol(scheme, httpTransport{next: client.Protocols[scheme]})
	}
}

// defaultDialer is what Options.Dial defaults to: net/http's default
// transport dials with these values.
var defaultDialer = &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}

var (
	connectors sync.Map // id → *connector
	lastID     atomic.Uint64
)

// connector holds what one go-git call connects with.
type connector struct {
	// ctx is the call's context: go-git dials SSH with a context of its
	// own, which carries neither the call's deadline nor its values.
	ctx  context.Context
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// proxy is Options.ProxyURL; nil: the environment's.
	proxy *url.URL
	// http serves the call over HTTP(S); nil over SSH.
	http *http.Transport
}

// connect registers the connector of one go-git call to ep and returns
// the proxy options that name it, and a function that unregisters it and
// closes its connections. Only http, https and ssh are served: go-git
// opens git:// connections and file:// paths itself, out of the hook's
// reach.
func (o Options) connect(ctx context.Context, ep *transport.Endpoint) (transport.ProxyOptions, func(), error) {
	c := &connector{ctx: ctx, dial: o.Dial}
	if c.dial == nil {
		c.dial = defaultDialer.DialContext
	}
	if o.ProxyURL != "" {
		u, err := url.Parse(o.ProxyURL)
		if err != nil {
			return transport.ProxyOptions{}, nil, fmt.Errorf("proxy URL: %w", err)
		}
		c.proxy = u
	}
	switch ep.Protocol {
	case "ssh":
	case "http", "https":
		if _, ok := client.Protocols[ep.Protocol].(httpTransport); !ok {
			return transport.ProxyOptions{}, nil, fmt.Errorf("go-git's %s transport was replaced (client.InstallProtocol): the Dial hook cannot reach it", ep.Protocol)
		}
		tr, err := c.httpTransport(o.CABundle)
		if err != nil {
			return transport.ProxyOptions{}, nil, err
		}
		c.http = tr
	default:
		return transport.ProxyOptions{}, nil, fmt.Errorf("scheme %q is not supported: only http, https and ssh are", ep.Protocol)
	}
	id := strconv.FormatUint(lastID.Add(1), 10)
	connectors.Store(id, c)
	release := func() {
		connectors.Delete(id)
		if c.http != nil {
			c.http.CloseIdleConnections()
		}
	}
	return transport.ProxyOptions{URL: dialScheme + "://" + id}, release, nil
}

// lookup returns the connector a proxy URL names.
func lookup(u *url.URL) (*connector, error) {
	if c, ok := connectors.Load(u.Host); ok {
		return c.(*connector), nil
	}
	return nil, fmt.Errorf("no connection settings for %s (the call has ended)", u.Redacted())
}

// httpTransport returns the transport of one call: net/http's defaults,
// with the hook, the system roots plus caBundle, and the proxy.
func (c *connector) httpTransport(caBundle []byte) (*http.Transport, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = c.dial
	if len(caBundle) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil {
			return nil, err
		}
		pool.AppendCertsFromPEM(caBundle)
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	if c.proxy != nil {
		tr.Proxy = http.ProxyURL(c.proxy)
	}
	return tr, nil
}

// httpTransport serves go-git's HTTP(S) calls: those that name a
// connector with the connector's transport, the others (go-git used
// elsewhere in the process) as go-git would.
type httpTransport struct {
	next transport.Transport
}

func (t httpTransport) NewUploadPackSession(ep *transport.Endpoint, auth transport.AuthMethod) (transport.UploadPackSession, error) {
	tr, ep, err := t.forCall(ep)
	if err != nil {
		return nil, err
	}
	return tr.NewUploadPackSession(ep, auth)
}

func (t httpTransport) NewReceivePackSession(ep *transport.Endpoint, auth transport.AuthMethod) (transport.ReceivePackSession, error) {
	tr, ep, err := t.forCall(ep)
	if err != nil {
		return nil, err
	}
	return tr.NewReceivePackSession(ep, auth)
}

// forCall returns the go-git transport for ep, and ep without the
// connector's name.
func (t httpTransport) forCall(ep *transport.Endpoint) (transport.Transport, *transport.Endpoint, error) {
	u, err := url.Parse(ep.Proxy.URL)
	if ep.Proxy.URL == "" || err != nil || u.Scheme != dialScheme {
		return t.next, ep, nil
	}
	c, err := lookup(u)
	if err != nil {
		return nil, nil, err
	}
	plain := *ep
	plain.Proxy = transport.ProxyOptions{}
	return githttp.NewClient(&http.Client{Transport: c.http}), &plain, nil
}

// sshDialer opens go-git's SSH connections with the hook, through the
// proxy when there is one: Options.ProxyURL, else the ALL_PROXY
// environment, as go-git does.
type sshDialer struct{ c *connector }

func (d sshDialer) Dial(network, addr string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, addr)
}

func (d sshDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	dctx, cancel := context.WithCancel(d.c.ctx)
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	var via proxy.Dialer = hookDialer(d.c.dial)
	if d.c.proxy != nil {
		p, err := proxy.FromURL(d.c.proxy, via)
		if err != nil {
			return nil, err
		}
		via = p
	} else {
		via = proxy.FromEnvironmentUsing(via)
	}
	if cd, ok := via.(proxy.ContextDialer); ok {
		return cd.DialContext(dctx, network, addr)
	}
	return via.Dial(network, addr)
}

// hookDialer is the Dial hook as an x/net/proxy dialer.
type hookDialer func(ctx context.Context, network, addr string) (net.Conn, error)

func (h hookDialer) Dial(network, addr string) (net.Conn, error) {
	return h(context.Background(), network, addr)
}

func (h hookDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return h(ctx, network, addr)
}
