package frame

import (
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/cozystack/cozy-aio/engine/internal/kinds"
)

// EventAction is the action of the Event that reports out for an object
// of kind: the stage of the reconcile it comes from, as Flux 2.10's
// controllers name their stages (kinds.EventAction: the kind's entry
// names them), so that Alerts and providers receive the same action.
// Sources report every outcome as Reconcile, as source-controller does.
func EventAction(kind string, out Outcome) string {
	if out.Action != "" {
		return out.Action
	}
	reason := out.Reason
	if reason == DependencyCycleReason {
		reason = meta.DependencyNotReadyReason
	}
	return kinds.EventAction(kind, reason)
}

// coreEvents records Kubernetes Events as core/v1 Events (client-go's
// tools/record), the backend Flux's controllers use by default
// (fluxcd/pkg/runtime/events). The events.k8s.io/v1 recorder sets
// eventTime, and the API server then rejects a note over 1,024 bytes, which
// that recorder drops without a word (Flux's messages often are longer:
// applied object lists, Helm errors); and it keeps every event it sent for
// 6 to 12 minutes to build series (about 1 KB per release), where the
// core/v1 correlator keeps caches of at most 4,096 entries. The related
// object and the action have no core/v1 field and are left out, as Flux
// leaves them.
type CoreEvents struct{ Recorder record.EventRecorder }

func (c CoreEvents) Eventf(regarding, _ runtime.Object, eventtype, reason, _, note string, args ...any) {
	c.Recorder.Eventf(regarding, eventtype, reason, note, args...)
}

func (c CoreEvents) AnnotatedEventf(regarding, _ runtime.Object, annotations map[string]string, eventtype, reason, _, note string, args ...any) {
	c.Recorder.AnnotatedEventf(regarding, annotations, eventtype, reason, note, args...)
}

// EventBroadcaster is client-go's core/v1 event broadcaster with its writes
// to the API server run in parallel (parallelSink). client-go writes one
// event at a time from one goroutine and drops whatever does not fit the
// 1,000 events it queues: at 10,000 HelmReleases on a busy API server it
// wrote one event in three (POST events 0.33 per release, against 1.01 with
// the events.k8s.io/v1 broadcaster, which writes each event from a goroutine
// of its own).
//
// Shutdown also ends the writers' retries.
type EventBroadcaster struct {
	record.EventBroadcaster
	done     chan struct{}
	shutdown func()
}

func NewEventBroadcaster() *EventBroadcaster {
	done := make(chan struct{})
	return &EventBroadcaster{EventBroadcaster: record.NewBroadcaster(), done: done,
		shutdown: sync.OnceFunc(func() { close(done) })}
}

// StartRecordingToSink implements record.EventBroadcaster.
func (b *EventBroadcaster) StartRecordingToSink(sink record.EventSink) watch.Interface {
	p := newParallelSink(sink, eventWriters, eventRetryDelay)
	p.done = b.done
	return b.EventBroadcaster.StartRecordingToSink(p)
}

// Shutdown implements record.EventBroadcaster.
func (b *EventBroadcaster) Shutdown() {
	b.shutdown()
	b.EventBroadcaster.Shutdown()
}

const (
	// eventWriters is how many event writes may be in flight.
	eventWriters = 16
	// eventTries and eventRetryDelay are client-go's: an event is written
	// up to 12 times, 10 s apart, while the API server cannot be reached.
	eventTries      = 12
	eventRetryDelay = 10 * time.Second
)

// parallelSink hands each write to a goroutine of its own, at most n at a
// time (the broadcaster waits for a free one), and answers at once with the
// event as sent. The correlator keeps that answer to patch the event's
// count later; a patch of an event the API server does not have (its
// create failed) creates it, as client-go does.
type parallelSink struct {
	sink  record.EventSink
	slots chan struct{}
	delay time.Duration
	// done ends the retries when closed (nil: never).
	done <-chan struct{}
}

func newParallelSink(sink record.EventSink, n int, delay time.Duration) *parallelSink {
	return &parallelSink{sink: sink, slots: make(chan struct{}, n), delay: delay}
}

func (s *parallelSink) Create(ev *corev1.Event) (*corev1.Event, error) {
	ev = ev.DeepCopy()
	s.write(func() error { _, err := s.sink.Create(ev); return err })
	return ev, nil
}

func (s *parallelSink) Update(ev *corev1.Event) (*corev1.Event, error) {
	ev = ev.DeepCopy()
	s.write(func() error { _, err := s.sink.Update(ev); return err })
	return ev, nil
}

func (s *parallelSink) Patch(ev *corev1.Event, data []byte) (*corev1.Event, error) {
	ev = ev.DeepCopy()
	s.write(func() error {
		_, err := s.sink.Patch(ev, data)
		if apierrors.IsNotFound(err) {
			created := ev.DeepCopy()
			created.ResourceVersion = ""
			_, err = s.sink.Create(created)
		}
		return err
	})
	return ev, nil
}

// write runs do in its own goroutine once a slot is free, and again while
// it fails to reach the API server (client-go's rule: an answer from the
// API server, or a request that cannot be built, is final).
func (s *parallelSink) write(do func() error) {
	s.slots <- struct{}{}
	go func() {
		defer func() { <-s.slots }()
		for try := 1; ; try++ {
			err := do()
			var status *apierrors.StatusError
			var build *restclient.RequestConstructionError
			if err == nil || errors.As(err, &status) || errors.As(err, &build) || try == eventTries {
				return
			}
			delay := s.delay
			if try == 1 {
				delay = time.Duration(rand.Float64() * float64(delay))
			}
			select {
			case <-s.done:
				return
			case <-time.After(delay):
			}
		}
	}()
}
