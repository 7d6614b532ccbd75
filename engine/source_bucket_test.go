package engine_test

import (
	"context"
	"crypto/md5" //nolint:gosec // the S3 ETag of a single-part object
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	swv1beta1 "github.com/fluxcd/source-watcher/api/v2/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

// startS3 starts SeaweedFS for one test, with a Secret in ns that holds
// its credentials under Flux's keys.
func startS3(t *testing.T, ns string) *testenv.S3 {
	t.Helper()
	s3, err := testenv.StartS3(testenv.S3Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s3.Close)
	if err := cp.Client.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "s3-creds", Namespace: ns},
		StringData: map[string]string{"accesskey": s3.AccessKey(), "secretkey": s3.SecretKey()},
	}); err != nil {
		t.Fatal(err)
	}
	return s3
}

func s3Bucket(ns, name string, s3 *testenv.S3, bucketName string) *sourcev1.Bucket {
	return &sourcev1.Bucket{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: sourcev1.BucketSpec{
			BucketName: bucketName, Endpoint: s3.Endpoint(), Insecure: true,
			Interval:  metav1.Duration{Duration: time.Hour},
			SecretRef: &meta.LocalObjectReference{Name: "s3-creds"},
		},
	}
}

// bucketRevision is Flux's revision of objects (key → content): the
// SHA-256 of "<key> <etag>\n" lines, where a single-part object's ETag is
// the MD5 of its content.
func bucketRevision(objs map[string]string) string {
	keys := make([]string, 0, len(objs))
	for k := range objs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	h := sha256.New()
	for _, k := range keys {
		sum := md5.Sum([]byte(objs[k])) //nolint:gosec
		fmt.Fprintf(h, "%s %s\n", k, hex.EncodeToString(sum[:]))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// objectGets returns the object keys of bucket downloaded since the last reset.
func objectGets(s3 *testenv.S3, bucket string) []string {
	var out []string
	for _, r := range s3.Requests() {
		if r.Method == "GET" && strings.HasPrefix(r.Path, "/"+bucket+"/") && len(r.Path) > len(bucket)+2 {
			out = append(out, strings.TrimPrefix(r.Path, "/"+bucket+"/"))
		}
	}
	slices.Sort(out)
	return out
}

// listings counts the object listings of bucket since the last reset.
func listings(s3 *testenv.S3, bucket string) int {
	n := 0
	for _, r := range s3.Requests() {
		if r.Method == "GET" && strings.TrimSuffix(r.Path, "/") == "/"+bucket && strings.Contains(r.Query, "list-type=2") {
			n++
		}
	}
	return n
}

func TestBucketStoresArtifactAndKustomizationApplies(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	s3 := startS3(t, ns)
	objs := map[string]string{
		"deploy/a.yaml":    configMap("a", ns),
		"deploy/b.yaml":    configMap("b", ns),
		"deploy/notes.txt": "not a manifest, ignored by spec.ignore\n",
	}
	if err := s3.MakeBucket(ctx, "manifests"); err != nil {
		t.Fatal(err)
	}
	for k, v := range objs {
		if err := s3.Put(ctx, "manifests", k, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := s3.Put(ctx, "manifests", "elsewhere/c.yaml", configMap("c", ns)); err != nil {
		t.Fatal(err)
	}
	startEngine(t, engine.Options{})
	b := s3Bucket(ns, "manifests", s3, "manifests")
	b.Spec.Prefix = "deploy/"
	ignore := "*.txt\n"
	b.Spec.Ignore = &ignore
	b.Spec.Interval = metav1.Duration{Duration: 2 * time.Second}
	if err := cp.Client.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	ks := kustomization(ns, "apps", "manifests", "./deploy")
	ks.Spec.SourceRef.Kind = sourcev1.BucketKind
	if err := cp.Client.Create(ctx, ks); err != nil {
		t.Fatal(err)
	}

	waitFor(t, b, readyIs(b, true), "Ready=True")
	delete(objs, "deploy/notes.txt")
	first := bucketRevision(objs)
	if a := b.Status.Artifact; a == nil || a.Revision != first || !strings.HasPrefix(a.Digest, "sha256:") || b.Status.URL == "" {
		t.Fatalf("artifact %+v url %q, want Flux's revision %s", a, b.Status.URL, first)
	}
	if b.Status.ObservedIgnore == nil || *b.Status.ObservedIgnore != ignore || b.Status.ObservedGeneration != b.Generation {
		t.Fatalf("observedIgnore %v observedGeneration %d", b.Status.ObservedIgnore, b.Status.ObservedGeneration)
	}
	if msg := conditions.GetMessage(b, meta.ReadyCondition); msg != "stored artifact: revision '"+first+"'" {
		t.Fatalf("Ready message %q", msg)
	}
	waitFor(t, ks, readyIs(ks, true), "Ready=True")
	if ks.Status.LastAppliedRevision != first {
		t.Fatalf("Kustomization applied %q, want %s", ks.Status.LastAppliedRevision, first)
	}
	for _, name := range []string{"a", "b"} {
		if !exists(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}) {
			t.Fatalf("ConfigMap %s from the bucket was not applied", name)
		}
	}
	if exists(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns}}) {
		t.Fatal("an object outside the prefix was applied")
	}

	// Unchanged bucket: reconciles list it every interval, download no
	// object (only the root .sourceignore is asked for, as Flux does) and
	// write nothing.
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
		t.Fatal(err)
	}
	rv := b.ResourceVersion
	s3.ResetRequests()
	deadline := time.Now().Add(30 * time.Second)
	for listings(s3, "manifests") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no two interval reconciles within 30s: %+v", s3.Requests())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := objectGets(s3, "manifests"); slices.ContainsFunc(got, func(k string) bool { return k != ".sourceignore" }) {
		t.Fatalf("an unchanged bucket downloaded %v", got)
	}
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
		t.Fatal(err)
	}
	if b.ResourceVersion != rv {
		t.Fatalf("an unchanged bucket was written (resourceVersion %s → %s): %+v", rv, b.ResourceVersion, b.Status)
	}

	// One object changes: a new revision, only that object downloaded, and
	// the Kustomization applies it.
	s3.ResetRequests()
	objs["deploy/b.yaml"] = strings.Replace(configMap("b", ns), "value", "changed", 1)
	if err := s3.Put(ctx, "manifests", "deploy/b.yaml", objs["deploy/b.yaml"]); err != nil {
		t.Fatal(err)
	}
	second := bucketRevision(objs)
	waitFor(t, ks, func() bool { return ks.Status.LastAppliedRevision == second && conditions.IsReady(ks) }, "second revision applied")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: ns}}
	if !exists(t, cm) || cm.Data["key"] != "changed" {
		t.Fatalf("ConfigMap b has %v, want the changed object", cm.Data)
	}
	if got := objectGets(s3, "manifests"); slices.ContainsFunc(got, func(k string) bool { return k != ".sourceignore" && k != "deploy/b.yaml" }) {
		t.Fatalf("after one object changed, downloaded %v", got)
	}
}

// TestBucketArtifactIsMaterialised empties the store after a Bucket's
// artifact was built: a Kustomization that needs it rebuilds it from the
// bucket, byte for byte the one status names, without a reconcile of the
// Bucket.
func TestBucketArtifactIsMaterialised(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	s3 := startS3(t, ns)
	if err := s3.MakeBucket(ctx, "wiped"); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"cm.yaml": configMap("from-bucket", ns), "skip.md": "ignored\n", ".sourceignore": "*.md\n"} {
		if err := s3.Put(ctx, "wiped", k, v); err != nil {
			t.Fatal(err)
		}
	}
	e := startEngine(t, engine.Options{})
	b := s3Bucket(ns, "wiped", s3, "wiped")
	if err := cp.Client.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	waitFor(t, b, readyIs(b, true), "Ready=True")
	built := *b.Status.Artifact.DeepCopy()
	wipeStore(t, e)
	s3.ResetRequests()
	ks := kustomization(ns, "from-bucket", "wiped", "./")
	ks.Spec.SourceRef.Kind = sourcev1.BucketKind
	if err := cp.Client.Create(ctx, ks); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ks, readyIs(ks, true), "Ready=True")
	if !exists(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "from-bucket", Namespace: ns}}) {
		t.Fatal("the ConfigMap from the rebuilt artifact was not applied")
	}
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
		t.Fatal(err)
	}
	if got := b.Status.Artifact; got.Digest != built.Digest || !got.LastUpdateTime.Equal(&built.LastUpdateTime) {
		t.Fatalf("status changed from %+v to %+v: the Bucket reconciler rebuilt it", built, *got)
	}
	if d := fileDigest(e, b.Status.Artifact); d != built.Digest {
		t.Fatalf("the store holds %q, want the status digest %s", d, built.Digest)
	}
	if got := objectGets(s3, "wiped"); !slices.Equal(got, []string{".sourceignore", "cm.yaml"}) {
		t.Fatalf("the rebuild downloaded %v, want the root .sourceignore and the one object not ignored", got)
	}
}

func TestBucketBadInput(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	s3 := startS3(t, ns)
	if err := s3.MakeBucket(ctx, "present"); err != nil {
		t.Fatal(err)
	}
	if err := s3.Put(ctx, "present", "cm.yaml", configMap("a", ns)); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "wrong", Namespace: ns}, StringData: map[string]string{"accesskey": s3.AccessKey(), "secretkey": "not-the-key"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "no-keys", Namespace: ns}, StringData: map[string]string{"username": "u"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "ca", Namespace: ns}, Data: map[string][]byte{"ca.crt": s3.CACert()}},
	} {
		if err := cp.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := closed.Addr().String()
	closed.Close()
	startEngine(t, engine.Options{})

	type bad struct {
		name, reason string
		mutate       func(*sourcev1.Bucket)
		want         []string
		stalled      bool
	}
	cases := []bad{
		{name: "wrong-credentials", reason: sourcev1.BucketOperationFailedReason,
			mutate: func(b *sourcev1.Bucket) { b.Spec.SecretRef.Name = "wrong" },
			want:   []string{"authentication failed"}},
		{name: "anonymous", reason: sourcev1.BucketOperationFailedReason,
			mutate: func(b *sourcev1.Bucket) { b.Spec.SecretRef = nil },
			want:   []string{"authentication failed"}},
		{name: "secret-without-keys", reason: sourcev1.AuthenticationFailedReason,
			mutate: func(b *sourcev1.Bucket) { b.Spec.SecretRef.Name = "no-keys" },
			want:   []string{"'accesskey' and 'secretkey'"}},
		{name: "bucket-not-found", reason: sourcev1.BucketOperationFailedReason,
			mutate: func(b *sourcev1.Bucket) { b.Spec.BucketName = "absent" },
			want:   []string{"bucket 'absent' not found"}},
		{name: "endpoint-not-answering", reason: sourcev1.BucketOperationFailedReason,
			mutate: func(b *sourcev1.Bucket) {
				b.Spec.Endpoint = deadAddr
				b.Spec.Timeout = &metav1.Duration{Duration: 5 * time.Second}
			},
			want: []string{"source host unreachable", deadAddr}},
		{name: "unknown-ca", reason: sourcev1.BucketOperationFailedReason,
			mutate: func(b *sourcev1.Bucket) { b.Spec.Endpoint, b.Spec.Insecure = s3.TLSEndpoint(), false },
			want:   []string{"source host unreachable", "certificate signed by unknown authority"}},
		{name: "aws", reason: engine.UnsupportedFieldReason, stalled: true,
			mutate: func(b *sourcev1.Bucket) { b.Spec.Provider = sourcev1.BucketProviderAmazon },
			want:   []string{"spec.provider (aws)"}},
	}
	var objs []*sourcev1.Bucket
	for _, c := range cases {
		b := s3Bucket(ns, c.name, s3, "present")
		c.mutate(b)
		if err := cp.Client.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, b)
	}
	// The same endpoint over HTTPS with certSecretRef holding its CA works:
	// nothing else stalls.
	good := s3Bucket(ns, "trusted-ca", s3, "present")
	good.Spec.Endpoint, good.Spec.Insecure = s3.TLSEndpoint(), false
	good.Spec.CertSecretRef = &meta.LocalObjectReference{Name: "ca"}
	if err := cp.Client.Create(ctx, good); err != nil {
		t.Fatal(err)
	}
	ks := kustomization(ns, "from-bucket", "trusted-ca", "./")
	ks.Spec.SourceRef.Kind = sourcev1.BucketKind
	if err := cp.Client.Create(ctx, ks); err != nil {
		t.Fatal(err)
	}
	suspended := s3Bucket(ns, "suspended", s3, "present")
	suspended.Spec.Suspend = true
	if err := cp.Client.Create(ctx, suspended); err != nil {
		t.Fatal(err)
	}

	for i, c := range cases {
		b := objs[i]
		waitFor(t, b, readyIs(b, false), "Ready=False")
		msg := conditions.GetMessage(b, meta.ReadyCondition)
		t.Logf("%s: %s", c.name, msg)
		if r := conditions.GetReason(b, meta.ReadyCondition); r != c.reason || !containsAll(msg, append(c.want, "Bucket/"+ns+"/"+c.name)) {
			t.Errorf("%s: reason %q message %q, want reason %s and a message naming the object and %q", c.name, r, msg, c.reason, c.want)
		}
		if conditions.IsStalled(b) != c.stalled {
			t.Errorf("%s: stalled %v, want %v", c.name, conditions.IsStalled(b), c.stalled)
		}
		if strings.Contains(msg, s3.SecretKey()) || strings.Contains(msg, "not-the-key") {
			t.Errorf("%s: the message shows a secret: %q", c.name, msg)
		}
	}
	waitFor(t, good, readyIs(good, true), "Ready=True")
	waitFor(t, ks, readyIs(ks, true), "Ready=True")
	if !exists(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: ns}}) {
		t.Fatal("the Kustomization from the trusted bucket did not apply")
	}
	// Every other Bucket was reconciled by now; the suspended one is left alone.
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(suspended), suspended); err != nil {
		t.Fatal(err)
	}
	if suspended.Status.Artifact != nil || len(suspended.Status.Conditions) > 0 {
		t.Fatalf("a suspended Bucket was reconciled: %+v", suspended.Status)
	}
}

// TestArtifactGeneratorComposesFromABucket uses a Bucket as a source of an
// ArtifactGenerator, as source-watcher allows; a Kustomization applies the
// output.
func TestArtifactGeneratorComposesFromABucket(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	s3 := startS3(t, ns)
	if err := s3.MakeBucket(ctx, "config"); err != nil {
		t.Fatal(err)
	}
	if err := s3.Put(ctx, "config", "deploy/cm.yaml", configMap("composed", ns)); err != nil {
		t.Fatal(err)
	}
	startEngine(t, engine.Options{})
	b := s3Bucket(ns, "config", s3, "config")
	gen := &swv1beta1.ArtifactGenerator{
		ObjectMeta: metav1.ObjectMeta{Name: "composed", Namespace: ns},
		Spec: swv1beta1.ArtifactGeneratorSpec{
			Sources: []swv1beta1.SourceReference{{Alias: "cfg", Kind: sourcev1.BucketKind, Name: "config"}},
			OutputArtifacts: []swv1beta1.OutputArtifact{{
				Name: "composed", Revision: "@cfg",
				Copy: []swv1beta1.CopyOperation{{From: "@cfg/deploy/**", To: "@artifact/"}},
			}},
		},
	}
	ks := kustomization(ns, "composed", "composed", "./")
	ks.Spec.SourceRef.Kind = sourcev1.ExternalArtifactKind
	for _, o := range []client.Object{b, gen, ks} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, b, readyIs(b, true), "Ready=True")
	ea := &sourcev1.ExternalArtifact{ObjectMeta: metav1.ObjectMeta{Name: "composed", Namespace: ns}}
	waitFor(t, ea, func() bool { return ea.Status.Artifact != nil && conditions.IsReady(ea) }, "an artifact")
	if ea.Status.Artifact.Revision != b.Status.Artifact.Revision {
		t.Fatalf("output revision %s, want the Bucket's %s", ea.Status.Artifact.Revision, b.Status.Artifact.Revision)
	}
	waitFor(t, ks, readyIs(ks, true), "Ready=True")
	if !exists(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "composed", Namespace: ns}}) {
		t.Fatal("the ConfigMap composed from the bucket was not applied")
	}
}
