package generator

import (
	"errors"
	"testing"
	"testing/fstest"

	swv1beta1 "github.com/fluxcd/source-watcher/api/v2/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/cozy-aio/source/generate"
)

func TestGeneratorOutputsFromPathPattern(t *testing.T) {
	sources := map[string]generate.Source{"src": {FS: fstest.MapFS{
		"clusters/Prod/apps/web/a.yaml":  {Data: []byte("a")},
		"clusters/prod2/apps/db/a.yaml":  {Data: []byte("a")},
		"clusters/prod2/apps/db/x/a.yml": {Data: []byte("a")},
		"clusters/README.md":             {Data: []byte("r")},
	}}}
	gen := func(pattern string, outs ...swv1beta1.OutputArtifact) *swv1beta1.ArtifactGenerator {
		return &swv1beta1.ArtifactGenerator{ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: "flux"},
			Spec: swv1beta1.ArtifactGeneratorSpec{PathPattern: pattern, OutputArtifacts: outs}}
	}
	out := swv1beta1.OutputArtifact{Name: "{env}-{app}", Namespace: "{env}", InputsFrom: "@src/clusters/{env}/in.yaml",
		Copy: []swv1beta1.CopyOperation{{From: "@src/clusters/{env}/apps/{app}/**", To: "@artifact/{app}/"}}}
	got, err := generatorOutputs(gen("@src/clusters/{env}/apps/{app}", out), sources)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("outputs %+v, want one per app directory", got)
	}
	// Names, namespaces and labels lower-cased; paths as found.
	if o := got[0]; o.Name != "prod-web" || o.namespace != "prod" || o.labels["env"] != "prod" || o.labels["app"] != "web" ||
		o.Copy[0].From != "@src/clusters/Prod/apps/web/**" || o.Copy[0].To != "@artifact/web/" || o.InputsFrom != "@src/clusters/Prod/in.yaml" {
		t.Fatalf("first output %+v", o)
	}
	if o := got[1]; o.Name != "prod2-db" || o.namespace != "prod2" {
		t.Fatalf("second output %+v", o)
	}
	// Without a pathPattern the outputs are as written, in the
	// generator's namespace unless they name one.
	got, err = generatorOutputs(gen("", swv1beta1.OutputArtifact{Name: "a"}, swv1beta1.OutputArtifact{Name: "a", Namespace: "b"}), sources)
	if err != nil || len(got) != 2 || got[0].namespace != "flux" || got[1].namespace != "b" {
		t.Fatalf("plain outputs %+v, %v", got, err)
	}

	for name, g := range map[string]*swv1beta1.ArtifactGenerator{
		"two directories, one name": gen("@src/clusters/{env}/apps/{app}", swv1beta1.OutputArtifact{Name: "{app}x"}, swv1beta1.OutputArtifact{Name: "{app}x"}),
		"two outputs, one name":     gen("", swv1beta1.OutputArtifact{Name: "a"}, swv1beta1.OutputArtifact{Name: "a", Namespace: "flux"}),
		"undefined capture":         gen("@src/clusters/{env}", swv1beta1.OutputArtifact{Name: "{app}"}),
		"unclosed capture":          gen("@src/clusters/{env", swv1beta1.OutputArtifact{Name: "x"}),
		"repeated capture":          gen("@src/{env}/{env}", swv1beta1.OutputArtifact{Name: "x"}),
		"unknown alias":             gen("@other/{env}", swv1beta1.OutputArtifact{Name: "x"}),
		"invalid name":              gen("@src/clusters/{env}", swv1beta1.OutputArtifact{Name: "{env}_x"}),
		"invalid namespace":         gen("@src/clusters/{env}", swv1beta1.OutputArtifact{Name: "x-{env}", Namespace: "a.{env}"}),
		"invalid label value":       gen("@src/{dir}", swv1beta1.OutputArtifact{Name: "x-{dir}"}),
	} {
		if _, err := generatorOutputs(g, map[string]generate.Source{"src": {FS: fstest.MapFS{
			"clusters/Prod/apps/web/a.yaml": {Data: []byte("a")},
			"clusters/prod/apps/web/a.yaml": {Data: []byte("a")},
			"-bad-/a.yaml":                  {Data: []byte("a")},
		}}}); !errors.Is(err, generate.ErrPathPattern) {
			t.Errorf("%s: %v, want ErrPathPattern", name, err)
		}
	}
}
