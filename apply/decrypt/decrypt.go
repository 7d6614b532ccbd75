package decrypt

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/aes"
	"github.com/getsops/sops/v3/age"
	"github.com/getsops/sops/v3/cmd/sops/formats"
	"github.com/getsops/sops/v3/config"
	"github.com/getsops/sops/v3/keyservice"
	"github.com/getsops/sops/v3/logging"
	"github.com/getsops/sops/v3/stores/dotenv"
	"github.com/getsops/sops/v3/stores/ini"
	"github.com/getsops/sops/v3/stores/json"
	"github.com/getsops/sops/v3/stores/yaml"
)

func init() {
	// SOPS logs through package-level logrus loggers, some of them with
	// the values it handles (a comment it cannot decrypt, for example).
	// Nothing of a decryption may reach the process's log.
	for _, l := range logging.Loggers {
		l.SetOutput(io.Discard)
	}
}

// AgeKeySuffix ends the names of the decryption Secret's entries that hold
// age identities, as kustomize-controller reads them.
const AgeKeySuffix = ".agekey"

// DefaultMaxFileSize bounds a source file decrypted in place, as Flux
// bounds it.
const DefaultMaxFileSize = 5 << 20

// ErrNoKeyMatched means that none of the decryption Secret's age
// identities opens a document's data key.
var ErrNoKeyMatched = errors.New("no age key of the decryption Secret matched")

// UnsupportedKeyError means that a decryption Secret entry holds, or a
// document can only be opened with, a key type other than age (PGP, cloud
// KMS, Vault).
type UnsupportedKeyError struct {
	// Where names the Secret entry or the document.
	Where string
	// Types are the key types as SOPS names them ("pgp", "kms", "gcp_kms",
	// "azure_kv", "hc_vault", "hckms").
	Types []string
}

func (e *UnsupportedKeyError) Error() string {
	return fmt.Sprintf("%s: SOPS %s keys are not supported, cozy-aio decrypts with age keys only", e.Where, strings.Join(e.Types, ", "))
}

// Options configures New. The zero value works.
type Options struct {
	// Secret names the decryption Secret in errors, for example
	// "Secret/flux-system/sops-age". Default: "the decryption Secret".
	Secret string
	// MaxFileSize bounds a source file that Sources decrypts. Default:
	// DefaultMaxFileSize.
	MaxFileSize int64
}

// Decryptor decrypts SOPS documents with a set of age identities. It holds
// no other state, and is safe for use by one goroutine at a time.
type Decryptor struct {
	ids  age.ParsedIdentities
	opts Options
	// ignored lists the Secret's entries that hold other key types.
	ignored []string
}

// unsupportedEntries maps the Secret entries kustomize-controller reads
// for other key types to the SOPS name of that type.
var unsupportedEntries = map[string]string{
	"sops.vault-token": "hc_vault",
	"sops.aws-kms":     "kms",
	"sops.azure-kv":    "azure_kv",
	"sops.gcp-kms":     "gcp_kms",
}

// New reads the age identities of a decryption Secret's data: every entry
// whose name ends in AgeKeySuffix holds one or more identities, one a line.
// An entry that holds another type of key for kustomize-controller (a .asc
// PGP key, sops.vault-token, sops.aws-kms, sops.azure-kv, sops.gcp-kms) is
// not used: a document that only such a key opens is an
// *UnsupportedKeyError, and the errors of documents name those entries.
// Other entries are ignored, as in Flux. A nil data map gives a Decryptor
// without identities, which opens nothing.
func New(data map[string][]byte, opts Options) (*Decryptor, error) {
	if opts.Secret == "" {
		opts.Secret = "the decryption Secret"
	}
	if opts.MaxFileSize == 0 {
		opts.MaxFileSize = DefaultMaxFileSize
	}
	d := &Decryptor{opts: opts}
	names := make([]string, 0, len(data))
	for name := range data {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		switch typ, other := unsupportedEntries[name]; {
		case other:
			d.ignored = append(d.ignored, fmt.Sprintf("%q (%s)", name, typ))
		case filepath.Ext(name) == ".asc":
			d.ignored = append(d.ignored, fmt.Sprintf("%q (pgp)", name))
		case filepath.Ext(name) == AgeKeySuffix:
			// The parser's error may quote the key: say which entry only.
			if err := d.ids.Import(string(data[name])); err != nil {
				return nil, fmt.Errorf("%s entry %q does not hold age identities", opts.Secret, name)
			}
		}
	}
	return d, nil
}

// Identities returns how many age identities the Decryptor holds.
func (d *Decryptor) Identities() int { return len(d.ids) }

// decryptData decrypts a SOPS document in format in and returns its
// cleartext in format out. The MAC is not verified, as in Flux: kustomize
// adds fields to the objects it renders. Where names the document in
// errors.
func (d *Decryptor) decryptData(where string, data []byte, in, out formats.Format) (_ []byte, err error) {
	defer func() {
		// Malformed documents can make SOPS panic, as Flux found.
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: the SOPS document does not decrypt", where)
		}
	}()
	tree, err := storeFor(in).LoadEncryptedFile(data)
	if err != nil {
		if errors.Is(err, sops.MetadataNotFound) {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		// Parser errors may quote the document: name the format only.
		return nil, fmt.Errorf("%s: not a SOPS-encrypted %s document", where, formatName(in))
	}
	if err := ageCanOpen(where, tree.Metadata); err != nil {
		return nil, err
	}
	var notUsed string
	if len(d.ignored) > 0 {
		notUsed = fmt.Sprintf("; %s entries %s are not used, cozy-aio decrypts with age keys only", d.opts.Secret, strings.Join(d.ignored, ", "))
	}
	key, err := tree.Metadata.GetDataKeyWithKeyServices([]keyservice.KeyServiceClient{ageService{ids: d.ids}}, sops.DefaultDecryptionOrder)
	if err != nil {
		msg := fmt.Sprintf("encrypted for %s", strings.Join(recipients(tree.Metadata), ", "))
		if len(d.ids) == 0 {
			msg += fmt.Sprintf("; %s holds no %s entry", d.opts.Secret, AgeKeySuffix)
		}
		return nil, fmt.Errorf("%s: %w (%s%s)", where, ErrNoKeyMatched, msg, notUsed)
	}
	// The cipher's errors quote the value that does not decrypt.
	if _, err := tree.Decrypt(key, aes.NewCipher()); err != nil {
		return nil, fmt.Errorf("%s: a value does not decrypt with the document's data key", where)
	}
	plain, err := storeFor(out).EmitPlainFile(tree.Branches)
	if err != nil {
		return nil, fmt.Errorf("%s: the decrypted document does not convert to %s", where, formatName(out))
	}
	return plain, nil
}

// ageCanOpen returns an *UnsupportedKeyError when fewer key groups than
// the document needs hold an age key.
func ageCanOpen(where string, m sops.Metadata) error {
	need := 1
	if len(m.KeyGroups) > 1 {
		need = m.ShamirThreshold
		if need == 0 {
			need = len(m.KeyGroups)
		}
	}
	withAge := 0
	var others []string
	for _, g := range m.KeyGroups {
		hasAge := false
		for _, k := range g {
			if typ := k.TypeToIdentifier(); typ == "age" {
				hasAge = true
			} else if !slices.Contains(others, typ) {
				others = append(others, typ)
			}
		}
		if hasAge {
			withAge++
		}
	}
	if withAge >= need {
		return nil
	}
	if len(others) == 0 {
		return fmt.Errorf("%s: the SOPS metadata lists no key", where)
	}
	slices.Sort(others)
	return &UnsupportedKeyError{Where: where + " is encrypted", Types: others}
}

// recipients lists the age recipients of a document (public keys).
func recipients(m sops.Metadata) []string {
	var out []string
	for _, g := range m.KeyGroups {
		for _, k := range g {
			if a, ok := k.(*age.MasterKey); ok {
				out = append(out, a.Recipient)
			}
		}
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
	case formats.Ini:
		return ini.NewStore(&config.INIStoreConfig{})
	default:
		return json.NewBinaryStore(&config.JSONBinaryStoreConfig{})
	}
}

func formatName(f formats.Format) string {
	switch f {
	case formats.Yaml:
		return "YAML"
	case formats.Json:
		return "JSON"
	case formats.Dotenv:
		return "dotenv"
	case formats.Ini:
		return "INI"
	}
	return "binary"
}
