package replicas

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

	mu      sync.Mutex
	renewed time.Time // start of the last successful write as holder
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
func (r *Replicas) NewLeaseLock(name string, labels map[string]string) *heldLock {
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
// prepare, when set, runs before the election starts.
func (r *Replicas) elect(parent context.Context, lock *heldLock, prepare func(context.Context), started func(), stopped func(wasHeld bool)) (*elector, error) {
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
		if prepare != nil {
			prepare(ctx)
		}
		le.Run(ctx)
	}()
	return el, nil
}

// takeExpired waits, while another holder's Lease is live by this
// replica's observation, and takes it once that holder has let it expire.
// client-go's elector would first watch the Lease for a whole duration of
// its own, which doubles a takeover after a crash: this replica has been
// watching the Lease all along through its informer. The write carries
// the resourceVersion observed, so a holder that renewed meanwhile wins.
func (r *Replicas) takeExpired(ctx context.Context, name string) {
	step := max(r.o.RetryPeriod/4, 50*time.Millisecond)
	for {
		r.mu.Lock()
		s, ok := r.seen[name]
		r.mu.Unlock()
		if !ok || s.holder == "" || s.holder == r.id {
			return // nothing to take over: the election creates or acquires it
		}
		if !s.live(time.Now()) {
			r.take(ctx, name, s.rv)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(step):
		}
	}
}

// take writes this replica as the holder of Lease name, if it is still at
// resourceVersion rv.
func (r *Replicas) take(ctx context.Context, name, rv string) {
	leases := r.cs.CoordinationV1().Leases(r.o.Namespace)
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	if err != nil || l.ResourceVersion != rv {
		return
	}
	now := metav1.NowMicro()
	id := r.id
	secs := int32(r.o.LeaseDuration / time.Second)
	transitions := int32(1)
	if l.Spec.LeaseTransitions != nil {
		transitions += *l.Spec.LeaseTransitions
	}
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = &id, &secs
	l.Spec.AcquireTime, l.Spec.RenewTime, l.Spec.LeaseTransitions = &now, &now, &transitions
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err == nil {
		r.log.Info("took over an expired Lease", "lease", r.o.Namespace+"/"+name)
	}
}
