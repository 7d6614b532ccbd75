package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
)

// Class is what a tenant-chosen address is for; each class refuses its own
// ranges by default.
type Class int

const (
	// Endpoint is an address the engine sends credentials or its own data
	// to: a remote cluster's API server (kubeconfig server, generic
	// provider address), a notification Provider's address or proxy, a
	// foreign artifact's URL. Refused by default: link-local (cloud
	// metadata), unspecified and the node's loopback.
	Endpoint Class = iota + 1
	// Source is an address a source fetches from: Git, OCI, Helm
	// repositories, buckets. Refused by default: link-local and
	// unspecified. Loopback stays allowed: a registry mirror on the
	// node's loopback is a real setup.
	Source
)

func (c Class) String() string {
	switch c {
	case Endpoint:
		return "endpoint"
	case Source:
		return "source"
	}
	return fmt.Sprintf("Class(%d)", int(c))
}

// rule is a range a class refuses by default, and why.
type rule struct {
	prefix netip.Prefix
	why    string
}

func rules(why string, prefixes ...string) []rule {
	out := make([]rule, len(prefixes))
	for i, p := range prefixes {
		out[i] = rule{netip.MustParsePrefix(p), why}
	}
	return out
}

var (
	linkLocal = append(rules("link-local, where cloud metadata services hand out the node's credentials",
		"169.254.0.0/16", "fe80::/10"),
		rules("a cloud metadata service", "fd00:ec2::254/128")...)
	unspecified = rules("unspecified, which reaches the node itself", "0.0.0.0/8", "::/128")
	loopback    = rules("the node's loopback, where the kubelet, etcd and the engine listen", "127.0.0.0/8", "::1/128")
)

// defaults returns the ranges class c refuses unless allowed.
func (c Class) defaults() [][]rule {
	if c == Source {
		return [][]rule{linkLocal, unspecified}
	}
	return [][]rule{linkLocal, unspecified, loopback}
}

// Policy says which addresses tenant-chosen connections may reach. The
// zero value refuses each class's default ranges and allows the rest.
type Policy struct {
	// Allow holds ranges let through although a class refuses them by
	// default, such as 127.0.0.0/8 for tenant clusters that listen on
	// loopback in a test. Default: none.
	Allow []netip.Prefix
	// Deny holds ranges refused for every class, whatever Allow says, such
	// as the management cluster's pod and service networks. Default: none.
	Deny []netip.Prefix
}

// RefusedError reports an address the policy refuses. Callers branch on
// it to stall the object: no retry makes a refused address allowed.
type RefusedError struct {
	// Class is the class of the address.
	Class Class
	// Addr is the refused address.
	Addr netip.Addr
	// Range is the refusing range.
	Range netip.Prefix
	// Reason says what the range holds.
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("the destination policy refuses %s for %s addresses: %s is %s "+
		"(an operator allows a range with --destination-allow)", e.Addr, e.Class, e.Range, e.Reason)
}

// Check returns a *RefusedError if p refuses addr for class c.
func (p Policy) Check(c Class, addr netip.Addr) error {
	addr = addr.Unmap().WithZone("")
	for _, pre := range p.Deny {
		if pre.Contains(addr) {
			return &RefusedError{Class: c, Addr: addr, Range: pre, Reason: "denied by the operator (--destination-deny)"}
		}
	}
	for _, pre := range p.Allow {
		if pre.Contains(addr) {
			return nil
		}
	}
	for _, set := range c.defaults() {
		for _, r := range set {
			if r.prefix.Contains(addr) {
				return &RefusedError{Class: c, Addr: addr, Range: r.prefix, Reason: r.why}
			}
		}
	}
	return nil
}

// Dialer returns a copy of base that refuses, before connecting, every
// address p refuses for class c. The check runs on the resolved address
// each connection is made to, so what was checked is what is dialled.
func (p Policy) Dialer(c Class, base *net.Dialer) *net.Dialer {
	d := &net.Dialer{}
	if base != nil {
		*d = *base
	}
	next, nextPlain := d.ControlContext, d.Control
	d.Control = nil
	d.ControlContext = func(ctx context.Context, network, address string, raw syscall.RawConn) error {
		if err := p.checkDialed(c, network, address); err != nil {
			return err
		}
		switch {
		case next != nil:
			return next(ctx, network, address, raw)
		case nextPlain != nil:
			return nextPlain(network, address, raw)
		}
		return nil
	}
	return d
}

func (p Policy) checkDialed(c Class, network, address string) error {
	if !strings.HasPrefix(network, "tcp") && !strings.HasPrefix(network, "udp") {
		return fmt.Errorf("the destination policy refuses %s connections", network)
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("the destination policy cannot read the address %q: %w", address, err)
	}
	return p.Check(c, ap.Addr())
}

// CheckURL resolves the host of raw and returns a *RefusedError if p
// refuses any of its addresses for class c: to refuse a tenant's address
// with a clear message before any work starts. A host that does not
// resolve is not refused here: its connection fails on its own. raw may
// lack a scheme ("host:port"). The dialer's check still guards the
// connection itself.
func (p Policy) CheckURL(ctx context.Context, c Class, raw string) error {
	host := hostOf(raw)
	if host == "" {
		return nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return p.Check(c, a)
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if err := p.Check(c, a); err != nil {
			return fmt.Errorf("%s resolves to %s: %w", host, a.Unmap(), err)
		}
	}
	return nil
}

// hostOf returns the host name or address of a URL or a host[:port].
func hostOf(raw string) string {
	if !strings.Contains(raw, "://") {
		raw = "//" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(u.Hostname(), ".")
}

// Refused tells whether err, or an error it wraps, is the policy's refusal.
func Refused(err error) (*RefusedError, bool) {
	var re *RefusedError
	ok := errors.As(err, &re)
	return re, ok
}

// ParsePrefixes reads a comma-separated list of CIDR ranges or single
// addresses, as the operator's flags give them.
func ParsePrefixes(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, fmt.Errorf("%q is neither a CIDR range nor an address", f)
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		pre, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, err
		}
		out = append(out, pre.Masked())
	}
	return out, nil
}
