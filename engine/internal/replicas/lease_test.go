package replicas

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// fakeLock answers writes with err; the Lease API itself is exercised by
// the replica tests against the API server.
type fakeLock struct {
	resourcelock.Interface
	err error
}

func (f *fakeLock) Create(context.Context, resourcelock.LeaderElectionRecord) error { return f.err }
func (f *fakeLock) Update(context.Context, resourcelock.LeaderElectionRecord) error { return f.err }
func (f *fakeLock) Identity() string                                                { return "me" }

func TestHeldLockValidity(t *testing.T) {
	ctx := context.Background()
	inner := &fakeLock{}
	l := &heldLock{Interface: inner}
	if l.valid(time.Hour) {
		t.Fatal("valid before any write")
	}
	if err := l.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"}); err != nil {
		t.Fatal(err)
	}
	if !l.valid(time.Hour) {
		t.Fatal("not valid right after writing the Lease as holder")
	}
	// A paused process: its last renewal is older than the deadline.
	time.Sleep(20 * time.Millisecond)
	if l.valid(10 * time.Millisecond) {
		t.Fatal("still valid after the renew deadline passed")
	}
	// A failed renewal keeps the old time: validity runs out by the clock.
	inner.err = errors.New("conflict")
	_ = l.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"})
	if l.valid(10 * time.Millisecond) {
		t.Fatal("a failed renewal made the lock valid again")
	}
	inner.err = nil
	_ = l.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"})
	if !l.valid(time.Hour) {
		t.Fatal("a successful renewal did not make the lock valid")
	}
	// Released: the record names nobody.
	_ = l.Update(ctx, resourcelock.LeaderElectionRecord{})
	if l.valid(time.Hour) {
		t.Fatal("valid after releasing the Lease")
	}
}
