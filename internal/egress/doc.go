// Package egress is the destination policy: which network addresses the
// engine may connect to when a tenant chose the address (a kubeconfig's
// server, a generic kubeConfig provider's address, a notification
// Provider's address or proxy, a foreign artifact's URL, a source's URL).
//
// The engine runs on a control-plane node's host network: the node's
// loopback holds the kubelet, etcd and the engine's own servers, and the
// link-local range holds the cloud's metadata service, which hands out the
// node's credentials. A Policy refuses those by default, per Class, and an
// operator adds or removes ranges.
//
// The check is made on the address that is dialled, in the dialer's
// Control hook, after name resolution: a name that resolves to an allowed
// address when it is checked and to a refused one when it is dialled (DNS
// rebinding), and a redirect to a refused address, are refused all the
// same. CheckURL checks a URL ahead of any connection, to refuse it with a
// clear message before work starts.
//
//	p := egress.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
//	d := p.Dialer(egress.Endpoint, &net.Dialer{Timeout: 5 * time.Second})
//	tr := &http.Transport{DialContext: d.DialContext}
package egress
