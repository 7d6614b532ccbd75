package apply

import "testing"

func TestPruneVetoByOwnerLabels(t *testing.T) {
	live := func(labels map[string]string) *objectMeta {
		om := &objectMeta{}
		om.Metadata.Labels = labels
		return om
	}
	kustomization := Owner{Name: "apps", Namespace: "flux-system"}
	directory := Owner{Labels: map[string]string{"example.com/bootstrap": "true"}}
	tests := []struct {
		name   string
		owner  Owner
		labels map[string]string
		vetoed bool
	}{
		{"no owner prunes anything", Owner{}, nil, false},
		{"prefix labels match", kustomization, map[string]string{
			DefaultOwnerLabelPrefix + "/name": "apps", DefaultOwnerLabelPrefix + "/namespace": "flux-system"}, false},
		{"another owner's object", kustomization, map[string]string{
			DefaultOwnerLabelPrefix + "/name": "other", DefaultOwnerLabelPrefix + "/namespace": "flux-system"}, true},
		{"explicit labels match", directory, map[string]string{"example.com/bootstrap": "true"}, false},
		{"explicit labels missing", directory, map[string]string{DefaultOwnerLabelPrefix + "/name": "apps"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pruneVeto(live(tt.labels), tt.owner); (got != "") != tt.vetoed {
				t.Fatalf("pruneVeto = %q, want vetoed %v", got, tt.vetoed)
			}
		})
	}
}
