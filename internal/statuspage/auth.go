package statuspage

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	swv1beta1 "github.com/fluxcd/source-watcher/api/v2/v1beta1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// resourceOf is the API group and resource of each kind the page shows,
// for SubjectAccessReviews.
var resourceOf = map[string][2]string{
	sourcev1.GitRepositoryKind:      {sourcev1.GroupVersion.Group, "gitrepositories"},
	sourcev1.OCIRepositoryKind:      {sourcev1.GroupVersion.Group, "ocirepositories"},
	sourcev1.ExternalArtifactKind:   {sourcev1.GroupVersion.Group, "externalartifacts"},
	swv1beta1.ArtifactGeneratorKind: {swv1beta1.GroupVersion.Group, "artifactgenerators"},
	kustomizev1.KustomizationKind:   {kustomizev1.GroupVersion.Group, "kustomizations"},
	helmv2.HelmReleaseKind:          {helmv2.GroupVersion.Group, "helmreleases"},
}

// Bounds and lifetimes of what the access layer caches.
const (
	// reviewTTL is how long a token's review and a user's access decision
	// are reused: a revoked token or binding takes effect within it.
	reviewTTL = time.Minute
	// maxReviews bounds the cached token reviews and access decisions.
	maxReviews = 16384
	// sessionTTL is how long a session cookie lasts; maxSessions bounds
	// the sessions held.
	sessionTTL  = 8 * time.Hour
	maxSessions = 4096
	// sessionCookie is the cookie's name: it holds a random ID only.
	sessionCookie = "cozy-aio-session"
)

// viewer is who asks: everyone on a loopback listener, or a user the API
// server authenticated.
type viewer struct {
	// all is set on a loopback listener: the node's own operator.
	all  bool
	user authenticationv1.UserInfo
	a    *access
}

// can tells whether the viewer may verb the kind in namespace.
func (v *viewer) can(ctx context.Context, verb, kind, namespace string) bool {
	if v.all {
		return true
	}
	return v.a.allowed(ctx, v.user, verb, kind, namespace)
}

// visible returns a memoised "may get" for one request.
func (v *viewer) visible(ctx context.Context) func(Ref) bool {
	if v.all {
		return func(Ref) bool { return true }
	}
	seen := map[[2]string]bool{}
	return func(r Ref) bool {
		k := [2]string{r.Kind, r.Namespace}
		ok, found := seen[k]
		if !found {
			ok = v.a.allowed(ctx, v.user, "get", r.Kind, r.Namespace)
			seen[k] = ok
		}
		return ok
	}
}

type cached[T any] struct {
	v  T
	at time.Time
}

// ttlMap is a bounded map whose entries expire after reviewTTL.
type ttlMap[T any] struct {
	mu  sync.Mutex
	m   map[string]cached[T]
	max int
	ttl time.Duration
}

func newTTLMap[T any](max int, ttl time.Duration) *ttlMap[T] {
	return &ttlMap[T]{m: map[string]cached[T]{}, max: max, ttl: ttl}
}

func (t *ttlMap[T]) get(k string, now time.Time) (T, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.m[k]
	if !ok || now.Sub(c.at) > t.ttl {
		var zero T
		return zero, false
	}
	return c.v, true
}

func (t *ttlMap[T]) put(k string, v T, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.m) >= t.max {
		// Drop the expired ones; if none, drop an arbitrary half.
		for key, c := range t.m {
			if now.Sub(c.at) > t.ttl {
				delete(t.m, key)
			}
		}
		for key := range t.m {
			if len(t.m) < t.max/2 {
				break
			}
			delete(t.m, key)
		}
	}
	t.m[k] = cached[T]{v, now}
}

func (t *ttlMap[T]) del(k string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, k)
}

// access checks tokens with TokenReview and decisions with
// SubjectAccessReview through the engine's own identity, and caches both.
type access struct {
	api      client.Client
	reviews  *ttlMap[authenticationv1.UserInfo]
	rejected *ttlMap[string]
	allow    *ttlMap[bool]
	sessions *ttlMap[authenticationv1.UserInfo]
	now      func() time.Time
}

func newAccess(api client.Client) *access {
	return &access{
		api:      api,
		reviews:  newTTLMap[authenticationv1.UserInfo](maxReviews, reviewTTL),
		rejected: newTTLMap[string](maxReviews, reviewTTL),
		allow:    newTTLMap[bool](maxReviews, reviewTTL),
		sessions: newTTLMap[authenticationv1.UserInfo](maxSessions, sessionTTL),
		now:      time.Now,
	}
}

var errNoToken = errors.New("a Kubernetes bearer token is required off the loopback: send it as `Authorization: Bearer TOKEN`, or sign in on the page")

// authenticate reads the request's bearer token (or session cookie) and
// reviews it.
func (a *access) authenticate(r *http.Request) (authenticationv1.UserInfo, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		token, ok := strings.CutPrefix(h, "Bearer ")
		if !ok || strings.TrimSpace(token) == "" {
			return authenticationv1.UserInfo{}, errors.New("the Authorization header is not `Bearer TOKEN`")
		}
		return a.review(r.Context(), strings.TrimSpace(token))
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		if u, ok := a.sessions.get(c.Value, a.now()); ok {
			return u, nil
		}
		return authenticationv1.UserInfo{}, errors.New("the session has expired: sign in again")
	}
	return authenticationv1.UserInfo{}, errNoToken
}

// review asks the API server who token belongs to.
func (a *access) review(ctx context.Context, token string) (authenticationv1.UserInfo, error) {
	sum := sha256.Sum256([]byte(token))
	key := base64.RawStdEncoding.EncodeToString(sum[:])
	now := a.now()
	if u, ok := a.reviews.get(key, now); ok {
		return u, nil
	}
	if msg, ok := a.rejected.get(key, now); ok {
		return authenticationv1.UserInfo{}, errors.New(msg)
	}
	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
	if err := a.api.Create(ctx, tr); err != nil {
		return authenticationv1.UserInfo{}, errors.New("reviewing the token: " + err.Error())
	}
	if !tr.Status.Authenticated {
		msg := "the token was not accepted by the API server"
		if tr.Status.Error != "" {
			msg += ": " + tr.Status.Error
		}
		a.rejected.put(key, msg, now)
		return authenticationv1.UserInfo{}, errors.New(msg)
	}
	a.reviews.put(key, tr.Status.User, now)
	return tr.Status.User, nil
}

// newSession returns a random session ID for u.
func (a *access) newSession(u authenticationv1.UserInfo) (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	id := base64.RawURLEncoding.EncodeToString(b)
	a.sessions.put(id, u, a.now())
	return id, nil
}

// allowed asks (or remembers) whether u may verb kind in namespace: a
// cluster-wide grant answers for every namespace.
func (a *access) allowed(ctx context.Context, u authenticationv1.UserInfo, verb, kind, namespace string) bool {
	res, ok := resourceOf[kind]
	if !ok {
		return false
	}
	if namespace != "" && a.allowed(ctx, u, verb, kind, "") {
		return true
	}
	key := u.UID + "\x00" + u.Username + "\x00" + strings.Join(u.Groups, ",") + "\x00" + verb + "\x00" + kind + "\x00" + namespace
	now := a.now()
	if v, ok := a.allow.get(key, now); ok {
		return v
	}
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: res[0], Resource: res[1], Namespace: namespace},
	}}
	if err := a.api.Create(ctx, sar); err != nil {
		// Not cached: the next request asks again.
		return false
	}
	a.allow.put(key, sar.Status.Allowed, now)
	return sar.Status.Allowed
}
