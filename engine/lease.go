package engine

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// heldLock is a Lease lock that remembers when this process last wrote
// the Lease as its holder. Writes of what the Lease protects are allowed
// only while that write is younger than the renew deadline: others take
// the Lease only once they have seen it unchanged for a whole lease
// duration, so a process that was paused (SIGSTOP) or cut off finds its
// right to write expired by its own clock before anyone else can hold it.
type heldLock struct {
	resourcelock.Interface

	// onEvent, when set, is told of "became leader" and "stopped leading".
	onEvent func(string)

	mu      sync.Mutex
	renewed time.Time // start of the last successful write as holder
}

func (l *heldLock) RecordEvent(s string) {
	if l.onEvent != nil {
		l.onEvent(s)
	}
}

var _ resourcelock.Interface = (*heldLock)(nil)

func (l *heldLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	t := time.Now()
	err := l.Interface.Create(ctx, ler)
	l.record(t, ler, err)
	return err
}

func (l *heldLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	t := time.Now()
	err := l.Interface.Update(ctx, ler)
	l.record(t, ler, err)
	return err
}

func (l *heldLock) record(t time.Time, ler resourcelock.LeaderElectionRecord, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case ler.HolderIdentity != l.Identity():
		// Released (or written for another holder): no right to write.
		l.renewed = time.Time{}
	case err == nil:
		l.renewed = t
	}
}

// valid tells whether the last renewal is younger than deadline.
func (l *heldLock) valid(deadline time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.renewed.IsZero() && time.Since(l.renewed) < deadline
}

// newLeaseLock is the lock of Lease name in namespace, held as identity.
func (r *replicas) newLeaseLock(name string, labels map[string]string) *heldLock {
	return &heldLock{Interface: &resourcelock.LeaseLock{
		LeaseMeta:  leaseMeta(r.o.Namespace, name),
		Client:     r.cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: r.id},
		Labels:     labels,
	}}
}

// elector runs client-go's leader election on one Lease until its context
// ends; on cancel it releases the Lease if it holds it.
type elector struct {
	lock   *heldLock
	cancel context.CancelFunc
	done   chan struct{}
	// held is set between OnStartedLeading and OnStoppedLeading.
	mu   sync.Mutex
	held bool
}

// begin marks the Lease held unless leading already ended: client-go calls
// OnStartedLeading in a goroutine that may run after OnStoppedLeading.
func (el *elector) begin(ctx context.Context) bool {
	el.mu.Lock()
	defer el.mu.Unlock()
	if ctx.Err() != nil {
		return false
	}
	el.held = true
	return true
}

func (el *elector) end() bool {
	el.mu.Lock()
	defer el.mu.Unlock()
	was := el.held
	el.held = false
	return was
}

func (el *elector) isHeld() bool {
	el.mu.Lock()
	defer el.mu.Unlock()
	return el.held
}

// stop cancels the election (releasing a held Lease) and waits for it.
func (el *elector) stop() {
	el.cancel()
	<-el.done
}

// elect starts an elector on lock. started and stopped run when this
// process gains and loses the Lease; stopped also runs when it never had it.
func (r *replicas) elect(parent context.Context, lock *heldLock, started func(), stopped func(wasHeld bool)) (*elector, error) {
	ctx, cancel := context.WithCancel(parent)
	el := &elector{lock: lock, cancel: cancel, done: make(chan struct{})}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   r.o.LeaseDuration,
		RenewDeadline:   r.o.RenewDeadline,
		RetryPeriod:     r.o.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            lock.Describe(),
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				if el.begin(ctx) {
					started()
				}
			},
			OnStoppedLeading: func() { stopped(el.end()) },
		},
	})
	if err != nil {
		cancel()
		return nil, err
	}
	go func() {
		defer close(el.done)
		le.Run(ctx)
	}()
	return el, nil
}
