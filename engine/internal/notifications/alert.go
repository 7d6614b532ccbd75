package notifications

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"

	notifyv1 "github.com/fluxcd/notification-controller/api/v1"
	notifyv1beta3 "github.com/fluxcd/notification-controller/api/v1beta3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/internal/egress"
	"github.com/cozystack/cozy-aio/internal/redact"
	"github.com/cozystack/cozy-aio/notify"
)

// providerRecheck is how often a Provider's Secrets are read again, since
// Secrets are not watched (they are not cached, by design).
const providerRecheck = 5 * time.Minute

// reconcileProvider resolves a Provider's Secrets and hands it to the
// dispatcher. A Provider that cannot be used gets a Warning Event naming
// the cause (its Secret and key), and its Alerts report it when they fire.
func (n *Notifier) reconcileProvider(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var p notifyv1beta3.Provider
	if err := n.deps.Manager.GetClient().Get(ctx, req.NamespacedName, &p); err != nil {
		if apierrors.IsNotFound(err) {
			n.dispatcher.DeleteProvider(req.NamespacedName)
			n.reported.Delete("Provider/" + req.String())
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !p.DeletionTimestamp.IsZero() {
		n.dispatcher.DeleteProvider(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	cfg, reason, err := n.providerConfig(ctx, &p)
	if err == nil {
		reason = notifyv1.ValidationFailedReason
		err = n.dispatcher.SetProvider(req.NamespacedName, cfg)
	} else {
		n.dispatcher.SetProviderError(req.NamespacedName, err)
	}
	msg := ""
	if err != nil {
		msg = fmt.Sprintf("Provider/%s/%s: %v", p.Namespace, p.Name, err)
	}
	n.reportState("Provider", req.NamespacedName, &p, reason, msg, "the Provider is usable again")
	return ctrl.Result{RequeueAfter: providerRecheck}, nil
}

// providerConfig builds the dispatcher's Provider from the object and its
// Secrets; the error names the Secret and the key at fault, and the reason
// is UnsupportedField or ValidationFailed.
func (n *Notifier) providerConfig(ctx context.Context, p *notifyv1beta3.Provider) (notify.Provider, string, error) {
	cfg := notify.Provider{Type: p.Spec.Type, Address: p.Spec.Address, Channel: p.Spec.Channel, Username: p.Spec.Username,
		Timeout: p.GetTimeout(), UID: string(p.UID), Suspend: p.Spec.Suspend}
	if err := frame.Unsupported(notifyv1beta3.ProviderKind,
		frame.FieldCheck{Path: "spec.type " + p.Spec.Type, Set: !slices.Contains(notify.ProviderTypes, p.Spec.Type)},
		frame.FieldCheck{Path: "spec.serviceAccountName", Set: p.Spec.ServiceAccountName != ""},
		frame.FieldCheck{Path: "spec.commitStatusExpr", Set: p.Spec.CommitStatusExpr != ""},
	); err != nil {
		return cfg, frame.UnsupportedFieldReason, err
	}
	invalid := func(err error) (notify.Provider, string, error) { return cfg, notifyv1.ValidationFailedReason, err }
	proxy := p.Spec.Proxy
	addressField, proxyField := "spec.address", "spec.proxy"
	if ref := p.Spec.SecretRef; ref != nil {
		s, err := n.deps.Secret(ctx, "spec.secretRef", p.Namespace, ref.Name)
		if err != nil {
			return invalid(err)
		}
		if v := s.Data["address"]; len(v) > 0 {
			cfg.Address = string(v)
			addressField = fmt.Sprintf("Secret %s/%s key 'address'", p.Namespace, ref.Name)
		}
		if v := s.Data["proxy"]; len(v) > 0 {
			proxy = string(v)
			proxyField = fmt.Sprintf("Secret %s/%s key 'proxy'", p.Namespace, ref.Name)
		}
		if v := s.Data["username"]; len(v) > 0 {
			cfg.Username = string(v)
		}
		cfg.Token, cfg.Password = string(s.Data["token"]), string(s.Data["password"])
		if h := s.Data["headers"]; len(h) > 0 {
			if err := yaml.UnmarshalStrict(h, &cfg.Headers); err != nil {
				return invalid(fmt.Errorf("Secret %s/%s key 'headers': want a YAML map of strings: %w", p.Namespace, ref.Name, err))
			}
		}
		if cfg.Address == "" {
			return invalid(fmt.Errorf("no address: spec.address is empty and Secret %s/%s has no key 'address'", p.Namespace, ref.Name))
		}
	}
	if ref := p.Spec.ProxySecretRef; ref != nil {
		s, err := n.deps.Secret(ctx, "spec.proxySecretRef", p.Namespace, ref.Name)
		if err != nil {
			return invalid(err)
		}
		if proxy, err = frame.ProxyURL(s); err != nil {
			return invalid(err)
		}
		proxyField = fmt.Sprintf("Secret %s/%s (spec.proxySecretRef)", p.Namespace, ref.Name)
	}
	if proxy != "" {
		u, err := url.Parse(proxy)
		if err != nil || u.Host == "" {
			return invalid(errors.New("the proxy address is not a URL"))
		}
		cfg.Proxy = u
	}
	if err := n.checkProviderDestinations(ctx, cfg, addressField, proxyField); err != nil {
		return invalid(err)
	}
	if ref := p.Spec.CertSecretRef; ref != nil {
		s, err := n.deps.Secret(ctx, "spec.certSecretRef", p.Namespace, ref.Name)
		if err != nil {
			return invalid(err)
		}
		if len(s.Data["ca.crt"]) == 0 && len(s.Data["caFile"]) > 0 {
			s.Data["ca.crt"] = s.Data["caFile"] // Flux's former key
		}
		if len(s.Data["ca.crt"]) == 0 && len(s.Data["tls.crt"]) == 0 {
			return invalid(fmt.Errorf("Secret %s/%s (spec.certSecretRef) has no key 'ca.crt'", p.Namespace, ref.Name))
		}
		if cfg.TLS, err = frame.TLSFromSecret(s); err != nil {
			return invalid(err)
		}
	}
	return cfg, "", nil
}

// checkProviderDestinations refuses a Provider whose address or proxy the
// destination policy refuses, naming the field; the dispatcher's dialer
// refuses them again at each connection, after resolution. Addresses that
// are not URLs (a chat channel's name) are the sender's to judge.
func (n *Notifier) checkProviderDestinations(ctx context.Context, cfg notify.Provider, addressField, proxyField string) error {
	policy := n.deps.Destinations
	if cfg.Address != "" {
		if err := policy.CheckURL(ctx, egress.Endpoint, cfg.Address); err != nil {
			return fmt.Errorf("%s: %w", addressField, redact.Error(err))
		}
	}
	if cfg.Proxy != nil {
		if err := policy.CheckURL(ctx, egress.Endpoint, cfg.Proxy.String()); err != nil {
			return fmt.Errorf("%s: %w", proxyField, redact.Error(err))
		}
	}
	return nil
}

// reconcileAlert hands an Alert to the dispatcher. An Alert with a regular
// expression that does not compile gets a Warning Event and sends nothing.
func (n *Notifier) reconcileAlert(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var a notifyv1beta3.Alert
	if err := n.deps.Manager.GetClient().Get(ctx, req.NamespacedName, &a); err != nil {
		if apierrors.IsNotFound(err) {
			n.dispatcher.DeleteAlert(req.NamespacedName)
			n.reported.Delete("Alert/" + req.String())
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !a.DeletionTimestamp.IsZero() {
		n.dispatcher.DeleteAlert(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	alert, err := alertConfig(&a, n.deps.Restricted)
	if err != nil {
		n.dispatcher.DeleteAlert(req.NamespacedName)
		n.reportState("Alert", req.NamespacedName, &a, notifyv1.ValidationFailedReason,
			fmt.Sprintf("Alert/%s/%s: %v", a.Namespace, a.Name, err), "the Alert is valid again")
		return ctrl.Result{}, nil
	}
	n.dispatcher.SetAlert(req.NamespacedName, alert)
	n.reportState("Alert", req.NamespacedName, &a, notifyv1.ValidationFailedReason, "", "the Alert is valid again")
	return ctrl.Result{}, nil
}

func alertConfig(a *notifyv1beta3.Alert, restricted bool) (notify.Alert, error) {
	out := notify.Alert{
		Severity: a.Spec.EventSeverity, Metadata: a.Spec.EventMetadata,
		Summary: a.Spec.Summary, Suspend: a.Spec.Suspend,
	}
	out.Provider.Namespace, out.Provider.Name = a.Namespace, a.Spec.ProviderRef.Name
	var err error
	if out.Inclusion, err = notify.CompileAlertRegexps("spec.inclusionList", a.Spec.InclusionList); err != nil {
		return out, err
	}
	if out.Exclusion, err = notify.CompileAlertRegexps("spec.exclusionList", a.Spec.ExclusionList); err != nil {
		return out, err
	}
	for _, s := range a.Spec.EventSources {
		if restricted && s.Namespace != "" && s.Namespace != a.Namespace {
			return out, fmt.Errorf("event source %s/%s/%s: cross-namespace references are disabled", s.Kind, s.Namespace, s.Name)
		}
		out.Sources = append(out.Sources, notify.Source{Kind: s.Kind, Name: s.Name, Namespace: s.Namespace, MatchLabels: s.MatchLabels})
	}
	return out, nil
}
