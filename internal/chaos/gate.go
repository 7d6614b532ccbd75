package chaos

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"
)

// GateMode is what a Gate does with requests.
type GateMode int

const (
	// GateOpen passes every request to the server.
	GateOpen GateMode = iota
	// GateSlow passes every request after the gate's delay.
	GateSlow
	// GateFailing answers every request with 500 Internal Server Error.
	GateFailing
	// GateDown closes the listener and every open connection: clients get
	// "connection refused", as from a stopped server.
	GateDown
)

func (m GateMode) String() string {
	return [...]string{"open", "slow", "failing", "down"}[m]
}

// Gate is a reverse proxy on a fixed loopback port in front of a real
// server (the Git server, the registry): cozy-aio is given the gate's
// address, and the campaign stops, slows or breaks the server as cozy-aio
// sees it. The Host header is kept, so that a registry's absolute URLs
// name the gate.
type Gate struct {
	addr  string
	proxy *httputil.ReverseProxy

	mu    sync.Mutex
	mode  GateMode
	delay time.Duration
	srv   *http.Server
	// Requests counts the requests seen by mode.
	requests map[GateMode]int
}

// StartGate starts a gate in front of target (an http:// URL).
func StartGate(target string) (*Gate, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	g := &Gate{addr: l.Addr().String(), requests: map[GateMode]int{}}
	g.proxy = &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(u)
		r.Out.Host = r.In.Host
	}}
	g.serve(l)
	return g, nil
}

// Addr is the gate's host:port; URL its http:// URL.
func (g *Gate) Addr() string { return g.addr }
func (g *Gate) URL() string  { return "http://" + g.addr }

func (g *Gate) serve(l net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(g.handle), ReadHeaderTimeout: 10 * time.Second}
	g.srv = srv
	go func() { _ = srv.Serve(l) }()
}

func (g *Gate) handle(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	mode, delay := g.mode, g.delay
	g.requests[mode]++
	g.mu.Unlock()
	switch mode {
	case GateFailing:
		http.Error(w, "chaos: the server fails", http.StatusInternalServerError)
		return
	case GateSlow:
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	g.proxy.ServeHTTP(w, r)
}

// Set switches the gate to mode (delay is GateSlow's). Down closes the
// listener and cuts every connection; leaving Down listens again on the
// same port.
func (g *Gate) Set(mode GateMode, delay time.Duration) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	was := g.mode
	g.mode, g.delay = mode, delay
	switch {
	case mode == GateDown && was != GateDown:
		return g.srv.Close()
	case mode != GateDown && was == GateDown:
		var l net.Listener
		var err error
		// The port was ours a moment ago; the kernel may hold it briefly.
		for i := 0; i < 50; i++ {
			if l, err = net.Listen("tcp", g.addr); err == nil {
				g.serve(l)
				return nil
			}
			time.Sleep(100 * time.Millisecond)
		}
		return err
	}
	return nil
}

// Mode is the gate's current mode.
func (g *Gate) Mode() GateMode {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mode
}

// Close stops the gate.
func (g *Gate) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := g.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = g.srv.Close()
		}
	}
}
