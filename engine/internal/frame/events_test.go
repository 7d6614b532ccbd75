package frame

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
)

// slowSink stands for an API server that takes a while per event write
// (a busy one cannot be made slow on purpose in a test): it counts what
// reaches it, by name, and fails the writes fail says to.
type slowSink struct {
	delay   time.Duration
	mu      sync.Mutex
	created map[string]int
	patched int
	fail    func(verb string, ev *corev1.Event) error
}

func (s *slowSink) do(verb string, ev *corev1.Event) error {
	time.Sleep(s.delay)
	if s.fail != nil {
		if err := s.fail(verb, ev); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch verb {
	case "create":
		s.created[ev.InvolvedObject.Name]++
	case "patch":
		s.patched++
	}
	return nil
}

func (s *slowSink) Create(ev *corev1.Event) (*corev1.Event, error) { return ev, s.do("create", ev) }
func (s *slowSink) Update(ev *corev1.Event) (*corev1.Event, error) { return ev, s.do("update", ev) }
func (s *slowSink) Patch(ev *corev1.Event, _ []byte) (*corev1.Event, error) {
	return ev, s.do("patch", ev)
}

func (s *slowSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.created)
}

// TestEventBroadcasterKeepsUpWithABurst records events for 1,500 objects
// at 500 a second through a sink that takes 20 ms per write, as a busy API
// server does: every event arrives. client-go's broadcaster alone writes
// them one at a time (50 a second) and drops what does not fit its queue
// of 1,000, which the second half of the test shows, so that the first
// half is known to test something.
func TestEventBroadcasterKeepsUpWithABurst(t *testing.T) {
	const objects = 1500
	burst := func(b record.EventBroadcaster, wait time.Duration) int {
		sink := &slowSink{delay: 20 * time.Millisecond, created: map[string]int{}}
		b.StartRecordingToSink(sink)
		defer b.Shutdown()
		rec := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "cozy-aio"})
		for i := range objects {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i), Namespace: "ns", UID: "u"}}
			rec.Eventf(cm, corev1.EventTypeNormal, "Installed", "release %d installed", i)
			if i%10 == 9 {
				time.Sleep(20 * time.Millisecond)
			}
		}
		for deadline := time.Now().Add(wait); sink.count() < objects && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
		}
		return sink.count()
	}
	if n := burst(NewEventBroadcaster(), 30*time.Second); n != objects {
		t.Errorf("%d of %d events written", n, objects)
	}
	// What it dropped never comes: a second is enough to see that.
	if n := burst(record.NewBroadcaster(), time.Second); n >= objects {
		t.Errorf("client-go's broadcaster alone wrote all %d events: the test does not show what the parallel writes change", n)
	}
}

// TestParallelSinkRetries checks client-go's rules: a write that cannot
// reach the API server is tried again; an answer from the API server is
// final; a patch of an event the API server does not have creates it.
func TestParallelSinkRetries(t *testing.T) {
	var tries atomic.Int32
	sink := &slowSink{created: map[string]int{}, fail: func(verb string, ev *corev1.Event) error {
		switch {
		case ev.InvolvedObject.Name == "unreachable" && tries.Add(1) < 3:
			return errors.New("connection refused")
		case ev.InvolvedObject.Name == "rejected":
			tries.Add(100)
			return apierrors.NewBadRequest("invalid event")
		case ev.InvolvedObject.Name == "gone" && verb == "patch":
			return apierrors.NewNotFound(schema.GroupResource{Resource: "events"}, ev.Name)
		}
		return nil
	}}
	p := newParallelSink(sink, 2, time.Millisecond)
	ev := func(name string) *corev1.Event {
		return &corev1.Event{InvolvedObject: corev1.ObjectReference{Name: name}}
	}
	p.Create(ev("unreachable"))
	p.Patch(ev("gone"), []byte(`{}`))
	deadline := time.Now().Add(10 * time.Second)
	for sink.count() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if sink.created["unreachable"] != 1 || tries.Load() != 3 {
		t.Errorf("an unreachable API server: %d created after %d tries, want 1 after 3", sink.created["unreachable"], tries.Load())
	}
	if sink.created["gone"] != 1 {
		t.Error("a patch of a missing event did not create it")
	}
	p.Create(ev("rejected"))
	time.Sleep(200 * time.Millisecond)
	if n := tries.Load(); n != 103 {
		t.Errorf("a rejected event was tried %d times, want once", (n-3)/100)
	}

	// Shutting the broadcaster down ends a write's retries.
	done := make(chan struct{})
	stuck := newParallelSink(&slowSink{created: map[string]int{}, fail: func(string, *corev1.Event) error {
		return errors.New("connection refused")
	}}, 1, time.Hour)
	stuck.done = done
	stuck.Create(ev("unreachable"))
	close(done)
	for deadline := time.Now().Add(10 * time.Second); len(stuck.slots) > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a write still retries after the broadcaster was shut down")
		}
	}
}
