package replicas

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cozystack/cozy-aio/apply/helm"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/engine/internal/kinds"
	"github.com/cozystack/cozy-aio/shard"
	"github.com/cozystack/cozy-aio/source"
)

// Labels on the Leases replicas write.
const (
	// LabelLeaseRole is "replica" on a replica's own Lease and "shard" on a
	// Helm shard's Lease.
	LabelLeaseRole = "cozy-aio.cozystack.io/lease-role"
	// LabelReplicaStart is, on a replica's Lease, when this incarnation of
	// the replica started (Unix nanoseconds): the pending Helm revisions of
	// an older incarnation are dead even while the replica lives.
	LabelReplicaStart = "cozy-aio.cozystack.io/replica-start"
	// LabelShard is the shard number on a shard's Lease.
	LabelShard = "cozy-aio.cozystack.io/shard"
	// LabelShardTerm is, on a shard's Lease, the term of its holder: a
	// value new each time a replica starts to elect the shard. A Helm
	// revision records the shard and term it was written under
	// (helm.LabelHolderClaim); once the Lease shows another holder or
	// term, its holder can no longer finish it, even while it lives.
	LabelShardTerm = "cozy-aio.cozystack.io/shard-term"

	roleReplica = "replica"
	roleShard   = "shard"
	RoleLeader  = "leader"
)

// replicas is this engine's part in a set of replicas: its own Lease, the
// Leases of the Helm shards it should own, and what it sees of the others.
type Replicas struct {
	deps  Deps
	o     Options
	id    string
	start time.Time
	cs    kubernetes.Interface
	log   logr.Logger
	kick  chan struct{}
	// leader is the leader Lease's lock when this engine elects its
	// leader; nil when an embedder's manager does.
	Leader *heldLock
	// firstLead is closed when this replica leads for the first time.
	FirstLead chan struct{}
	leadOnce  sync.Once
	// mirror keeps the artifacts statuses name in this replica's store
	// while it does not lead; nil without a shared artifact address.
	Mirror *mirror

	// pubMu orders the anchoring of the pool to published assignments;
	// pub is the last one anchored, nil before the first. It is never held
	// with mu.
	PubMu sync.Mutex
	Pub   *published

	mu       sync.Mutex
	seen     map[string]leaseSeen // by Lease name
	self     *elector
	lead     *elector
	shards   map[int]*shardLease
	stopping bool
}

// shardLease is this replica's election on one shard's Lease.
type shardLease struct {
	id int
	*elector
	// term is this election's LabelShardTerm.
	term string
	// releasing is set once the shard is being handed off: nothing new
	// starts on it, and its Lease is released when its running actions end.
	releasing bool
	// revoked is set when a hand-off cancels the actions still running
	// past its grace: from then on they may write no release record.
	revoked bool
}

// leaseSeen is what this replica last saw of a Lease, and when (by its
// own clock) the record last changed: a Lease is expired once it has not
// changed for its duration, whatever the clocks of other machines say.
type leaseSeen struct {
	holder, role, start, shard, term, renew, rv string
	at                                          time.Time
	duration                                    time.Duration
}

func (s leaseSeen) live(now time.Time) bool {
	return s.holder != "" && now.Sub(s.at) < s.duration
}

func New(d Deps) *Replicas {
	r := &Replicas{
		deps: d, o: d.Options, id: d.HolderID, start: d.Start, cs: d.Clientset,
		log:  d.Logger.WithName("replicas"),
		kick: make(chan struct{}, 1), FirstLead: make(chan struct{}),
		seen: map[string]leaseSeen{}, shards: map[int]*shardLease{},
	}
	if d.ArtifactBaseURL != "" {
		r.Mirror = newMirror(d.Keeper, d.Client, d.Cache, d.Store)
	}
	return r
}

// leaderKinds are the kinds only the leader reconciles.
func leaderKinds(kind string) bool {
	k, _ := kinds.Get(kind)
	return !k.Sharded
}

// Deps is what the replicas use of the engine.
type Deps struct {
	// Options are the replicas' settings; HolderID names this replica and
	// Start is when this incarnation started.
	Options  Options
	HolderID string
	Start    time.Time
	// Clientset writes the Leases; Logger logs the elections.
	Clientset kubernetes.Interface
	Logger    logr.Logger
	// Pool returns the pool that runs the Helm work (it is built with the
	// replicas' ownership); Shards is the fixed shard count (0: auto).
	Pool   func() *shard.Pool
	Shards int
	// Recorder records the Events about Leases.
	Recorder recorder.EventRecorder
	// Elected is closed once the engine's manager was elected.
	Elected func() <-chan struct{}
	// WakeKinds reconciles every object of the kinds match accepts;
	// WakeShard the HelmReleases of a shard; WakeTenant a tenant's.
	WakeKinds  func(ctx context.Context, match func(kind string) bool) error
	WakeShard  func(i int)
	WakeTenant func(tenant string)
	// ArtifactBaseURL, when set (a shared artifact address), makes this
	// replica mirror the artifacts statuses name, with the Keeper, the
	// Client and Cache it reads sources with, and the Store.
	ArtifactBaseURL string
	Keeper          ArtifactKeeper
	Client          client.Client
	Cache           cache.Informers
	Store           *source.Store
}

// startMirror runs the artifact mirror, if any, until ctx ends; the
// returned func waits for it to stop.
func (r *Replicas) startMirror(ctx context.Context) (wait func()) {
	if r.Mirror == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := r.Mirror.Start(ctx); err != nil {
			r.log.Error(err, "mirroring the artifacts statuses name")
		}
	}()
	return func() { <-done }
}

// NeedLeaderElection is false: every replica announces itself and runs
// the Helm shards it owns.
func (r *Replicas) NeedLeaderElection() bool { return false }

var leaseNameUnsafe = regexp.MustCompile(`[^a-z0-9.-]`)

func (r *Replicas) replicaLease() string {
	return r.o.LeasePrefix + "replica-" + strings.Trim(leaseNameUnsafe.ReplaceAllString(strings.ToLower(r.id), "-"), "-.")
}

func (r *Replicas) shardLeaseName(i int) string { return r.o.LeasePrefix + "shard-" + strconv.Itoa(i) }

func leaseMeta(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name}
}

func (r *Replicas) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Start announces this replica, watches the others, and keeps the shard
// Leases it holds in line with shard.Spread of the live replicas. When ctx
// ends it hands its shards off: nothing new starts, its own Lease goes
// first (so the others plan without it), then each shard's Lease once the
// actions running on it have ended, bounded by HandoffGrace.
func (r *Replicas) Start(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(r.cs, 0,
		informers.WithNamespace(r.o.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = LabelLeaseRole }))
	inf := factory.Coordination().V1().Leases().Informer()
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { r.observe(o, false) },
		UpdateFunc: func(_, o any) { r.observe(o, false) },
		DeleteFunc: func(o any) { r.observe(o, true) },
	}); err != nil {
		return err
	}
	assignments := factory.Core().V1().ConfigMaps().Informer()
	if _, err := assignments.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    r.observeAssignment,
		UpdateFunc: func(_, o any) { r.observeAssignment(o) },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	factory.WaitForCacheSync(ctx.Done())
	defer r.startMirror(ctx)()
	// Place with the published assignment before electing any shard: a
	// replica that starts runs nothing on a placement of its own.
	if o, ok, _ := assignments.GetStore().GetByKey(r.o.Namespace + "/" + r.assignmentName()); ok {
		r.observeAssignment(o)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	tick := time.NewTicker(r.o.RetryPeriod)
	defer tick.Stop()
	for {
		r.reconcile(runCtx)
		r.publishAssignment(runCtx)
		r.deps.Pool().Recheck()
		select {
		case <-ctx.Done():
			r.shutdown()
			return nil
		case <-r.kick:
		case <-tick.C:
		}
	}
}

// observe records a Lease event.
func (r *Replicas) observe(o any, deleted bool) {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o, deleted = d.Obj, true
	}
	l, ok := o.(*coordinationv1.Lease)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if deleted {
		delete(r.seen, l.Name)
		r.poke()
		return
	}
	s := leaseSeen{role: l.Labels[LabelLeaseRole], start: l.Labels[LabelReplicaStart], shard: l.Labels[LabelShard], term: l.Labels[LabelShardTerm], rv: l.ResourceVersion}
	if h := l.Spec.HolderIdentity; h != nil {
		s.holder = *h
	}
	if l.Spec.RenewTime != nil {
		s.renew = l.Spec.RenewTime.String()
	}
	if d := l.Spec.LeaseDurationSeconds; d != nil {
		s.duration = time.Duration(*d) * time.Second
	}
	prev, had := r.seen[l.Name]
	s.at = prev.at
	if !had || prev.holder != s.holder || prev.renew != s.renew || prev.start != s.start {
		s.at = time.Now()
	}
	r.seen[l.Name] = s
	if !had || prev.holder != s.holder || prev.start != s.start {
		r.poke()
	}
	if s.role == roleShard && s.holder == "" {
		// Released: try for it now rather than at the next retry.
		if i, err := strconv.Atoi(s.shard); err == nil {
			if sl := r.shards[i]; sl != nil && !sl.isHeld() && !sl.releasing {
				go r.retry(sl)
			}
		}
	}
}

// candidates are the live replicas that may own shards: the others whose
// Lease is live, and this one while it holds its Lease and is not leaving.
func (r *Replicas) candidates(now time.Time) []string {
	var out []string
	for _, s := range r.seen {
		if s.role == roleReplica && s.holder != r.id && s.live(now) {
			out = append(out, s.holder)
		}
	}
	if !r.stopping && r.self != nil && r.self.isHeld() {
		out = append(out, r.id)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// reconcile starts elections for the shards this replica should own and
// hands off those it should not.
func (r *Replicas) reconcile(ctx context.Context) {
	ids := r.deps.Pool().Shards()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopping {
		return
	}
	if r.self == nil || IsDone(r.self.done) {
		r.electSelf(ctx)
	}
	if r.Leader != nil && (r.lead == nil || IsDone(r.lead.done)) {
		r.electLeader(ctx)
	}
	want := shard.Spread(ids, r.candidates(time.Now()))
	for _, i := range ids {
		if want[i] == r.id && r.shards[i] == nil {
			r.electShard(ctx, i)
		}
	}
	for _, i := range r.orphans() {
		// A Lease in this replica's name that no election here holds: a
		// create whose answer was lost when its election was cancelled, or
		// a Lease of this replica's previous incarnation. Electing it takes
		// it at once (same identity); the loop below then hands it off
		// unless this replica should own it.
		r.electShard(ctx, i)
	}
	for i, s := range r.shards {
		if want[i] == r.id || s.releasing {
			continue
		}
		if s.isHeld() {
			s.releasing = true
			go r.handOff(s)
			continue
		}
		if r.seen[r.shardLeaseName(i)].holder == r.id {
			// Taking a Lease of its own: hand it off once held.
			continue
		}
		s.cancel()
		delete(r.shards, i)
	}
}

// orphans are the shards whose Lease names this replica as holder but
// that no election here runs for; r.mu is held.
func (r *Replicas) orphans() []int {
	var out []int
	for _, s := range r.seen {
		if s.role != roleShard || s.holder != r.id {
			continue
		}
		if i, err := strconv.Atoi(s.shard); err == nil && r.shards[i] == nil {
			out = append(out, i)
		}
	}
	return out
}

func IsDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// electSelf holds this replica's own Lease; r.mu is held.
func (r *Replicas) electSelf(ctx context.Context) {
	lock := r.NewLeaseLock(r.replicaLease(), map[string]string{
		LabelLeaseRole: roleReplica, LabelReplicaStart: strconv.FormatInt(r.start.UnixNano(), 10),
	})
	el, err := r.elect(ctx, lock, nil, func() {
		r.log.Info("replica announced", "replica", r.id, "lease", lock.Describe())
		r.poke()
	}, func(bool) { r.poke() })
	if err != nil {
		r.log.Error(err, "announcing the replica")
		return
	}
	r.self = el
}

// electLeader runs the election of the leader's Lease; r.mu is held. The
// leader-only reconcilers do nothing while this replica does not lead; when
// it starts to lead, every object of their kinds is reconciled.
func (r *Replicas) electLeader(ctx context.Context) {
	name := r.o.LeaderLease
	el, err := r.elect(ctx, r.Leader, func(ctx context.Context) { r.takeExpired(ctx, name) }, func() {
		r.LeaderEvent("became leader")
		r.leadOnce.Do(func() { close(r.FirstLead) })
		if err := r.deps.WakeKinds(ctx, leaderKinds); err != nil {
			r.log.Error(err, "waking the leader's reconcilers")
		}
	}, func(wasHeld bool) {
		if wasHeld {
			r.LeaderEvent("stopped leading")
		}
		r.poke()
	})
	if err != nil {
		r.log.Error(err, "electing the leader")
		return
	}
	r.lead = el
}

// electShard runs the election of shard i's Lease; r.mu is held.
func (r *Replicas) electShard(ctx context.Context, i int) {
	s := &shardLease{id: i, term: strconv.FormatInt(time.Now().UnixNano(), 10)}
	name := r.shardLeaseName(i)
	lock := r.NewLeaseLock(name, map[string]string{LabelLeaseRole: roleShard, LabelShard: strconv.Itoa(i), LabelShardTerm: s.term})
	el, err := r.elect(ctx, lock, func(ctx context.Context) { r.takeExpired(ctx, name) }, func() {
		r.log.Info("shard acquired", "replica", r.id, "shard", i, "lease", lock.Describe())
		r.event(lock, "ShardAcquired", "replica %s owns Helm shard %d", r.id, i)
		r.deps.Pool().Recheck()
		// The shard's releases come here: a crashed owner may have left
		// one pending, and this replica may hold no queued work for it.
		r.deps.WakeShard(i)
		r.poke()
	}, func(wasHeld bool) {
		if wasHeld {
			r.log.Info("shard given up", "replica", r.id, "shard", i, "lease", lock.Describe())
			r.event(lock, "ShardReleased", "replica %s no longer owns Helm shard %d", r.id, i)
			// Lost (a hand-off has ended its actions already): the
			// actions still running there may write no record any more
			// (mayWrite), and the next owner recovers their revisions.
			r.deps.Pool().Cancel(i, frame.ErrShardLost)
		}
		r.mu.Lock()
		if r.shards[i] == s && !s.releasing {
			// Lost without handing off (renewal failed): elect again.
			delete(r.shards, i)
		}
		r.mu.Unlock()
		r.poke()
	})
	if err != nil {
		r.log.Error(err, "electing shard", "shard", i)
		return
	}
	s.elector = el
	r.shards[i] = s
}

// retry restarts a pending election at once, when its Lease was released.
// The old elector must end first: two electors of one identity would both
// believe they hold the Lease.
func (r *Replicas) retry(s *shardLease) {
	s.stop()
	r.mu.Lock()
	if r.shards[s.id] == s && !s.releasing && !r.stopping {
		delete(r.shards, s.id)
	}
	r.mu.Unlock()
	r.poke()
}

// handOff releases a shard once nothing runs on it any more. Actions that
// still run after HandoffGrace are cancelled and may write no release
// record from then on: the next owner recovers their pending revisions, as
// after a crash, once the Lease shows this term has ended. Releasing the
// Lease with them running and able to write would leave their revisions
// pending under a live holder that can no longer finish them.
func (r *Replicas) handOff(s *shardLease) {
	r.deps.Pool().Recheck()
	ctx, cancel := context.WithTimeout(context.Background(), r.o.HandoffGrace)
	err := r.deps.Pool().Drain(ctx, s.id)
	cancel()
	if err != nil {
		r.log.Info("handing off shard: cancelling the Helm actions still running", "shard", s.id, "grace", r.o.HandoffGrace.String())
		r.mu.Lock()
		s.revoked = true
		r.mu.Unlock()
		r.deps.Pool().Cancel(s.id, frame.ErrHandedOff)
		ctx, cancel := context.WithTimeout(context.Background(), r.o.RenewDeadline)
		if err := r.deps.Pool().Drain(ctx, s.id); err != nil {
			r.log.Info("handing off shard with actions still running after their cancel", "shard", s.id, "error", err.Error())
		}
		cancel()
	}
	s.stop()
	r.mu.Lock()
	if r.shards[s.id] == s {
		delete(r.shards, s.id)
	}
	r.mu.Unlock()
	r.poke()
}

// shutdown hands every shard off and gives up this replica's Lease.
func (r *Replicas) shutdown() {
	r.mu.Lock()
	r.stopping = true
	self := r.self
	held := make([]*shardLease, 0, len(r.shards))
	for _, s := range r.shards {
		s.releasing = true
		held = append(held, s)
	}
	lead := r.lead
	r.mu.Unlock()
	r.deps.Pool().Recheck()
	// The leader's Lease and this replica's own go first, so that the
	// others lead and plan without it at once.
	if lead != nil {
		lead.stop()
	}
	if self != nil {
		self.stop()
	}
	var wg sync.WaitGroup
	for _, s := range held {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.handOff(s)
		}()
	}
	wg.Wait()
}

// mayWrite tells whether this replica may still write the Helm releases of
// shard i: it holds the shard's Lease and renewed it recently enough that
// nobody else can hold it yet. Running actions finish under it while a
// shard is handed off.
func (r *Replicas) MayWrite(i int) bool {
	r.mu.Lock()
	s := r.shards[i]
	revoked := s != nil && s.revoked
	r.mu.Unlock()
	return s != nil && !revoked && s.isHeld() && s.lock.valid(r.o.RenewDeadline)
}

// owns tells whether new Helm work of shard i may start here.
func (r *Replicas) Owns(i int) bool {
	r.mu.Lock()
	s := r.shards[i]
	ok := s != nil && !s.releasing && !r.stopping
	r.mu.Unlock()
	return ok && s.isHeld() && s.lock.valid(r.o.RenewDeadline)
}

// owned lists the shards this replica owns now.
func (r *Replicas) owned() []int {
	r.mu.Lock()
	ids := make([]int, 0, len(r.shards))
	for i := range r.shards {
		ids = append(ids, i)
	}
	r.mu.Unlock()
	out := ids[:0]
	for _, i := range ids {
		if r.Owns(i) {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out
}

// leading tells whether this replica is the leader and may write.
func (r *Replicas) Leading() bool {
	if r.Leader == nil {
		return IsDone(r.deps.Elected())
	}
	r.mu.Lock()
	lead := r.lead
	r.mu.Unlock()
	return lead != nil && lead.isHeld() && r.Leader.valid(r.o.RenewDeadline)
}

// alive tells whether the holder of a pending Helm revision may still
// finish it: its replica's Lease is live and names the same incarnation,
// and the shard Lease the revision was written under (its claim) still
// names that holder in the same term. A holder whose term ended cancelled
// the actions it ran there and writes no record of them any more (handOff,
// the elector's stop, mayWrite), so its revision is a leftover although
// the holder lives. A revision without a claim (written before claims
// were recorded) is judged by the replica's Lease alone.
func (r *Replicas) Alive(h helm.Holder) bool {
	now := time.Now()
	start := strconv.FormatInt(h.Start.UnixNano(), 10)
	i, term, claimed := parseClaim(h.Claim)
	live := false
	r.mu.Lock()
	for _, s := range r.seen {
		if s.role == roleReplica && s.live(now) && helm.RecordedID(s.holder) == h.ID && s.start == start {
			live = true
		}
	}
	var sl leaseSeen
	if claimed {
		sl = r.seen[r.shardLeaseName(i)]
	}
	r.mu.Unlock()
	if !live || !claimed || helm.RecordedID(sl.holder) == h.ID && sl.term == term {
		return live
	}
	// The cache says the term ended, but it may lag behind a Lease the
	// holder has taken since: ask the API server, which cannot.
	ctx, cancel := context.WithTimeout(context.Background(), r.o.RenewDeadline)
	defer cancel()
	l, err := r.cs.CoordinationV1().Leases(r.o.Namespace).Get(ctx, r.shardLeaseName(i), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false
	case err != nil:
		r.log.Info("cannot tell whether a pending Helm revision's holder still holds its shard; waiting", "holder", h.String(), "claim", h.Claim, "error", err.Error())
		return true
	}
	holder := ""
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	return helm.RecordedID(holder) == h.ID && l.Labels[LabelShardTerm] == term
}

// claim is what an action of shard i writes its release records under:
// the shard and this replica's term of its Lease (helm.Options.Claim).
func (r *Replicas) Claim(ctx context.Context) string {
	i, ok := shard.FromContext(ctx)
	if !ok {
		return ""
	}
	r.mu.Lock()
	s := r.shards[i]
	r.mu.Unlock()
	if s == nil {
		return ""
	}
	return strconv.Itoa(i) + "." + s.term
}

// parseClaim reads a claim written by claim.
func parseClaim(c string) (shard int, term string, ok bool) {
	id, term, found := strings.Cut(c, ".")
	n, err := strconv.Atoi(id)
	if !found || err != nil || n < 0 || term == "" {
		return 0, "", false
	}
	return n, term, true
}

// fence refuses a write of a Helm release record when the action runs on
// a shard this replica may no longer write.
func (r *Replicas) Fence(ctx context.Context, rel helm.Release) error {
	i, ok := shard.FromContext(ctx)
	if !ok || r.MayWrite(i) {
		return nil
	}
	return fmt.Errorf("replica %s no longer holds Lease %s/%s: not writing release %s", r.id, r.o.Namespace, r.shardLeaseName(i), rel)
}

// event records a Kubernetes Event on a Lease.
func (r *Replicas) event(lock *heldLock, reason, msg string, args ...any) {
	name := strings.TrimPrefix(lock.Describe(), r.o.Namespace+"/")
	lease := &coordinationv1.Lease{
		TypeMeta:   metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
		ObjectMeta: leaseMeta(r.o.Namespace, name),
	}
	r.deps.Recorder.Eventf(lease, nil, corev1.EventTypeNormal, reason, "Lease", msg, args...)
}

// moved is told by the pool of every tenant placed or moved. A tenant that
// comes to a shard this replica owns from one it does not own has its
// releases reconciled here: this replica may hold no work for them.
func (r *Replicas) Moved(m shard.Move) {
	if m.From == m.To || !r.Owns(m.To) || (m.From >= 0 && r.Owns(m.From)) {
		return
	}
	go r.deps.WakeTenant(m.Tenant)
}

// LeaderEvent logs and records the leader Lease's transitions.
func (r *Replicas) LeaderEvent(what string) {
	r.log.Info("leader lease: "+what, "replica", r.id, "lease", r.o.Namespace+"/"+r.o.LeaderLease)
	reason := "LeaderElected"
	if strings.Contains(what, "stopped") {
		reason = "LeaderLost"
	}
	r.event(r.Leader, reason, "replica %s %s", r.id, what)
}

// View is what this replica sees of the set: the live replicas and which
// one holds each Helm shard's Lease now.
type View struct {
	// Live are the replicas whose own Lease is live, sorted.
	Live []string
	// Holders are the shards' live holders, by shard.
	Holders map[int]string
}

// View returns what this replica sees of the others now, from the Leases.
func (r *Replicas) View() View {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	v := View{Holders: map[int]string{}}
	for _, s := range r.seen {
		if !s.live(now) {
			continue
		}
		switch s.role {
		case roleShard:
			if i, err := strconv.Atoi(s.shard); err == nil {
				v.Holders[i] = s.holder
			}
		case roleReplica:
			v.Live = append(v.Live, s.holder)
		}
	}
	slices.Sort(v.Live)
	return v
}
