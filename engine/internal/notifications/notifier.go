package notifications

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	notifyv1 "github.com/fluxcd/notification-controller/api/v1"
	notifyv1beta3 "github.com/fluxcd/notification-controller/api/v1beta3"
	eventv1 "github.com/fluxcd/pkg/apis/event/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	swv1beta1 "github.com/fluxcd/source-watcher/api/v2/v1beta1"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/engine/internal/kinds"
	"github.com/cozystack/cozy-aio/internal/egress"
	"github.com/cozystack/cozy-aio/notify"
)

// Options tune how events reach Alerts. The zero value works.
type Options struct {
	// RateLimit is how long the same event for the same object is not sent
	// again. Default: 5m, as Flux's notification-controller.
	RateLimit time.Duration
	// QueueSize is the number of events each Provider's queue holds;
	// more are dropped and counted. Default: 100.
	QueueSize int
	// Backoff is the wait before the first retry of a failed send,
	// doubled for each next one. Default: 1s.
	Backoff time.Duration
}

// Deps is what notifications use of the engine.
type Deps struct {
	// Manager runs the Provider, Alert and Receiver controllers, the
	// dispatcher and the webhook server; its client reads and patches.
	Manager manager.Manager
	// Options tune the dispatcher.
	Options Options
	// WebhookAddr is the Receivers' webhook address; empty: no server.
	WebhookAddr string
	// HolderID names this replica in the events sent.
	HolderID string
	// Restricted refuses cross-namespace references.
	Restricted bool
	// Registry receives the dispatcher's and the server's metrics.
	Registry prometheus.Registerer
	// Recorder records Kubernetes Events; Setup wraps it so that each is
	// also sent to the Alerts.
	Recorder recorder.EventRecorder
	// Finisher writes a Receiver's status.
	Finisher *frame.Finisher
	// Leading tells whether this replica leads: only the leader records
	// the Events about Alerts and Providers.
	Leading func() bool
	// Secret reads a Secret a Provider or Receiver names.
	Secret func(ctx context.Context, referrer, namespace, name string) (*corev1.Secret, error)
	// Destinations is the egress policy Providers' addresses pass.
	Destinations egress.Policy
	// NewObject returns an empty object of a kind the engine reconciles.
	NewObject func(kind string) (client.Object, bool)
}

// Notifier is the engine's part of notifications: the dispatcher events go
// to, the webhook server (nil when off), and the last reported state per
// Alert and Provider, so that each change is reported once.
type Notifier struct {
	deps       Deps
	opts       Options
	dispatcher *notify.Dispatcher
	webhooks   *notify.Server
	// plain records Kubernetes Events without sending them to Alerts.
	plain    recorder.EventRecorder
	reported sync.Map // objKey -> string (last error, "" when fine)
}

// Setup wires notifications: every event recorded through the recorder it
// returns also goes to the dispatcher; Provider, Alert and Receiver
// controllers feed it; the webhook server runs when WebhookAddr is set.
func Setup(d Deps) (*Notifier, recorder.EventRecorder, error) {
	n := &Notifier{deps: d, opts: d.Options, plain: d.Recorder}
	n.dispatcher = notify.NewDispatcher(notify.DispatcherOptions{
		RateLimit: n.opts.RateLimit, QueueSize: n.opts.QueueSize, Backoff: n.opts.Backoff,
		Registerer: d.Registry, Report: n.reportDelivery,
		// Providers' addresses and proxies are the tenant's to choose.
		Dial: d.Destinations.Dialer(egress.Endpoint, &net.Dialer{Timeout: 30 * time.Second}).DialContext,
	})
	runnables := []manager.Runnable{n.dispatcher}
	if d.WebhookAddr != "" {
		n.webhooks = notify.NewServer(notify.ServerOptions{
			Addr: d.WebhookAddr, Trigger: n.triggerReceiver, Registerer: d.Registry,
			Logger: d.Manager.GetLogger().WithName("webhook"),
		})
		runnables = append(runnables, n.webhooks)
	}
	for _, r := range runnables {
		if err := d.Manager.Add(frame.EveryReplica{Runnable: r}); err != nil {
			return nil, nil, err
		}
	}
	// Every replica records events (HelmReleases on the shard owners), so
	// every replica knows the Alerts and Providers; only the leader writes
	// a Receiver's status.
	every, skipNameValidation := false, true
	for _, c := range []struct {
		obj client.Object
		r   reconcile.Reconciler
	}{
		{&notifyv1beta3.Provider{}, reconcile.Func(n.reconcileProvider)},
		{&notifyv1beta3.Alert{}, reconcile.Func(n.reconcileAlert)},
		{&notifyv1.Receiver{}, reconcile.Func(n.reconcileReceiver)},
	} {
		err := ctrl.NewControllerManagedBy(d.Manager).For(c.obj).
			WithOptions(controller.Options{MaxConcurrentReconciles: 1, SkipNameValidation: &skipNameValidation, NeedLeaderElection: &every}).
			Complete(c.r)
		if err != nil {
			return nil, nil, err
		}
	}
	return n, &notifyingRecorder{EventRecorder: d.Recorder, n: n}, nil
}

// notifyingRecorder records each Kubernetes Event and also sends it, as a
// Flux event, to the dispatcher: in-process, without a network hop.
type notifyingRecorder struct {
	recorder.EventRecorder
	n *Notifier
}

func (r *notifyingRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.EventRecorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
	r.n.notifyEvent(regarding, nil, eventtype, reason, action, fmt.Sprintf(note, args...))
}

func (r *notifyingRecorder) AnnotatedEventf(regarding, related runtime.Object, annotations map[string]string, eventtype, reason, action, note string, args ...any) {
	r.EventRecorder.AnnotatedEventf(regarding, related, annotations, eventtype, reason, action, note, args...)
	r.n.notifyEvent(regarding, annotations, eventtype, reason, action, fmt.Sprintf(note, args...))
}

// reportingControllers name the Flux controller whose work each kind is,
// so that payloads read as Flux's.
var reportingControllers = map[string]string{
	sourcev1.GitRepositoryKind:      "source-controller",
	sourcev1.OCIRepositoryKind:      "source-controller",
	sourcev1.ExternalArtifactKind:   "source-controller",
	sourcev1.HelmRepositoryKind:     "source-controller",
	sourcev1.HelmChartKind:          "source-controller",
	sourcev1.BucketKind:             "source-controller",
	swv1beta1.ArtifactGeneratorKind: "source-watcher",
	kustomizev1.KustomizationKind:   "kustomize-controller",
	helmv2.HelmReleaseKind:          "helm-controller",
}

// notifyEvent turns a recorded event into Flux's event and hands it to
// the dispatcher. Events about objects the engine does not reconcile (its
// Leases, the notification kinds themselves) are not sent.
func (n *Notifier) notifyEvent(regarding runtime.Object, annotations map[string]string, eventtype, reason, action, message string) {
	obj, ok := regarding.(client.Object)
	if !ok || obj.GetNamespace() == "" {
		return
	}
	gvk, err := apiutil.GVKForObject(obj, n.deps.Manager.GetScheme())
	if err != nil {
		return
	}
	controllerName, ok := reportingControllers[gvk.Kind]
	if !ok {
		return
	}
	severity := notify.SeverityInfo
	if eventtype == corev1.EventTypeWarning {
		severity = notify.SeverityError
	}
	ev := &notify.Event{
		InvolvedObject: corev1.ObjectReference{
			Kind: gvk.Kind, APIVersion: gvk.GroupVersion().String(), Namespace: obj.GetNamespace(), Name: obj.GetName(),
			UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion(),
		},
		Severity: severity, Timestamp: metav1.Now(), Message: message, Reason: reason, Action: action,
		Metadata: n.eventMetadata(obj, annotations), ReportingController: controllerName, ReportingInstance: n.deps.HolderID,
	}
	n.dispatcher.Record(ev, obj.GetLabels())
}

// eventMetadata is what Flux's controllers attach to an event: the
// revision (and, for a HelmRelease, the Git commit its chart was built
// from), and the object's event.toolkit.fluxcd.io/ annotations.
func (n *Notifier) eventMetadata(obj client.Object, annotations map[string]string) map[string]string {
	md := map[string]string{}
	for k, v := range annotations {
		md[k] = v
	}
	for k, v := range obj.GetAnnotations() {
		if key, ok := strings.CutPrefix(k, eventv1.Group+"/"); ok && key != "" {
			md[key] = v
		}
	}
	setIf(md, eventv1.MetaRevisionKey, kinds.Revision(obj))
	if hr, ok := obj.(*helmv2.HelmRelease); ok {
		setIf(md, eventv1.MetaOriginRevisionKey, n.chartOrigin(hr))
	}
	if len(md) == 0 {
		return nil
	}
	return md
}

func setIf(m map[string]string, k, v string) {
	if v != "" {
		m[k] = v
	}
}

// chartOrigin returns the Git revision a HelmRelease's chart artifact was
// built from (the OCI annotation org.opencontainers.image.revision), read
// from the informer cache.
func (n *Notifier) chartOrigin(hr *helmv2.HelmRelease) string {
	ref := hr.Spec.ChartRef
	if ref == nil || ref.Kind != sourcev1.OCIRepositoryKind {
		return ""
	}
	ns := ref.Namespace
	if ns == "" {
		ns = hr.Namespace
	}
	var src sourcev1.OCIRepository
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := n.deps.Manager.GetClient().Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, &src); err != nil || src.Status.Artifact == nil {
		return ""
	}
	return src.Status.Artifact.Metadata["org.opencontainers.image.revision"]
}

// reportDelivery records, on the Alert, a Kubernetes Event when its sends
// start failing or recover (Alert v1beta3 has no status in Flux).
func (n *Notifier) reportDelivery(d notify.Delivery) {
	msg := ""
	if d.Err != nil {
		msg = fmt.Sprintf("sending to Provider %s failed after %d attempt(s): %v", d.Provider.Name, d.Attempts, d.Err)
		if d.Dropped {
			msg = fmt.Sprintf("Provider %s: %v", d.Provider.Name, d.Err)
		}
	}
	alert := &notifyv1beta3.Alert{ObjectMeta: metav1.ObjectMeta{Namespace: d.Alert.Namespace, Name: d.Alert.Name}}
	alert.SetGroupVersionKind(notifyv1beta3.GroupVersion.WithKind(notifyv1beta3.AlertKind))
	n.reportState("Alert", d.Alert, alert, "NotificationFailed", msg, "notifications are sent again")
}

// reportState records a Warning Event on obj when its error changes, and a
// Normal one when it clears. The engine reports on Alerts and Providers
// with Events, as they have no status in Flux's v1beta3 API.
func (n *Notifier) reportState(kind string, ref types.NamespacedName, obj runtime.Object, reason, msg, recovered string) {
	key := kind + "/" + ref.String()
	prev, _ := n.reported.Swap(key, msg)
	if prevMsg, _ := prev.(string); prevMsg == msg {
		return
	}
	if !n.deps.Leading() {
		return
	}
	if msg == "" {
		if prev != nil {
			n.plain.Eventf(obj, nil, corev1.EventTypeNormal, meta.SucceededReason, "Notify", "%s", recovered)
		}
		return
	}
	n.plain.Eventf(obj, nil, corev1.EventTypeWarning, reason, "Notify", "%s", msg)
}
