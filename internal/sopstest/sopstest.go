// Package sopstest encrypts test fixtures with SOPS' own Go API for age
// keys generated in the test, so that no private key is checked in:
//
//	id := sopstest.NewIdentity(t)
//	enc := sopstest.Encrypt(t, []byte(secretYAML), sopstest.Options{Format: formats.Yaml,
//		Recipients: []string{id.Recipient}, EncryptedRegex: "^(data|stringData)$"})
package sopstest

import (
	"testing"
	"time"

	"filippo.io/age"
	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/aes"
	sopsage "github.com/getsops/sops/v3/age"
	"github.com/getsops/sops/v3/cmd/sops/formats"
	"github.com/getsops/sops/v3/config"
	"github.com/getsops/sops/v3/keys"
	"github.com/getsops/sops/v3/keyservice"
	"github.com/getsops/sops/v3/stores/dotenv"
	"github.com/getsops/sops/v3/stores/json"
	"github.com/getsops/sops/v3/stores/yaml"
)

// Identity is an age key pair made for one test.
type Identity struct {
	// Secret is the private key, AGE-SECRET-KEY-1…, the content of an
	// .agekey entry.
	Secret string
	// Recipient is the public key, age1….
	Recipient string
}

// NewIdentity generates an age X25519 identity.
func NewIdentity(t testing.TB) Identity {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return Identity{Secret: id.String(), Recipient: id.Recipient().String()}
}

// Options configures Encrypt.
type Options struct {
	// Format of the plaintext and of the encrypted document. Default:
	// formats.Binary (0), SOPS' JSON envelope.
	Format formats.Format
	// Recipients are the age public keys, all in one key group.
	Recipients []string
	// EncryptedRegex limits encryption to the matching keys, as
	// --encrypted-regex. Default: every value.
	EncryptedRegex string
}

// Encrypt encrypts plain as the sops CLI does.
func Encrypt(t testing.TB, plain []byte, opts Options) []byte {
	t.Helper()
	store := storeFor(opts.Format)
	branches, err := store.LoadPlainFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	var group sops.KeyGroup
	for _, r := range opts.Recipients {
		mk, err := sopsage.MasterKeyFromRecipient(r)
		if err != nil {
			t.Fatal(err)
		}
		group = append(group, keys.MasterKey(mk))
	}
	tree := sops.Tree{Branches: branches, Metadata: sops.Metadata{
		KeyGroups: []sops.KeyGroup{group}, EncryptedRegex: opts.EncryptedRegex, Version: "3.13.3",
	}}
	dataKey, errs := tree.GenerateDataKeyWithKeyServices([]keyservice.KeyServiceClient{keyservice.NewLocalClient()})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	cipher := aes.NewCipher()
	mac, err := tree.Encrypt(dataKey, cipher)
	if err != nil {
		t.Fatal(err)
	}
	tree.Metadata.LastModified = time.Now().UTC()
	tree.Metadata.MessageAuthenticationCode, err = cipher.Encrypt(mac, dataKey, tree.Metadata.LastModified.Format(time.RFC3339))
	if err != nil {
		t.Fatal(err)
	}
	out, err := store.EmitEncryptedFile(tree)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func storeFor(f formats.Format) sops.Store {
	switch f {
	case formats.Yaml:
		return yaml.NewStore(&config.YAMLStoreConfig{})
	case formats.Json:
		return json.NewStore(&config.JSONStoreConfig{})
	case formats.Dotenv:
		return dotenv.NewStore(&config.DotenvStoreConfig{})
	}
	return json.NewBinaryStore(&config.JSONBinaryStoreConfig{})
}
