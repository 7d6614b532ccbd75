package decrypt

import (
	"context"
	"errors"

	"github.com/getsops/sops/v3/age"
	"github.com/getsops/sops/v3/keyservice"
	"google.golang.org/grpc"
)

// ageService is a SOPS key service that opens data keys with a fixed set
// of age identities and nothing else: no other key type, and never the
// identities of the process's environment or home directory, which SOPS'
// age key source falls back to when it is given none.
type ageService struct {
	ids age.ParsedIdentities
}

var _ keyservice.KeyServiceClient = ageService{}

var (
	errNotAge       = errors.New("not an age key")
	errNoIdentities = errors.New("no age identity")
	errNoEncrypt    = errors.New("cozy-aio never encrypts")
)

func (s ageService) Decrypt(_ context.Context, req *keyservice.DecryptRequest, _ ...grpc.CallOption) (*keyservice.DecryptResponse, error) {
	k := req.GetKey().GetAgeKey()
	if k == nil {
		return nil, errNotAge
	}
	if len(s.ids) == 0 {
		return nil, errNoIdentities
	}
	mk := &age.MasterKey{Recipient: k.GetRecipient(), EncryptedKey: string(req.GetCiphertext())}
	s.ids.ApplyToMasterKey(mk)
	plain, err := mk.Decrypt()
	if err != nil {
		return nil, err
	}
	return &keyservice.DecryptResponse{Plaintext: plain}, nil
}

func (ageService) Encrypt(context.Context, *keyservice.EncryptRequest, ...grpc.CallOption) (*keyservice.EncryptResponse, error) {
	return nil, errNoEncrypt
}
