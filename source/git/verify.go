package git

import (
	"fmt"
	"io"

	fluxgit "github.com/fluxcd/pkg/git"
	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// signedCommit describes commit, fetched through ref (and the annotated
// tag, when ref is one), as fluxcd/pkg/git's Commit, whose methods verify
// its PGP and SSH signatures as source-controller does.
func signedCommit(repo *gogit.Repository, commit string, tag *object.Tag, ref plumbing.ReferenceName) (*fluxgit.Commit, error) {
	c, err := repo.CommitObject(plumbing.NewHash(commit))
	if err != nil {
		return nil, err
	}
	encoded, err := unsigned(c.EncodeWithoutSignature)
	if err != nil {
		return nil, fmt.Errorf("encoding commit %s: %w", c.Hash, err)
	}
	out := &fluxgit.Commit{
		Hash: fluxgit.Hash(c.Hash.String()), Reference: ref.String(),
		Author: signature(c.Author), Committer: signature(c.Committer),
		Signature: c.PGPSignature, Encoded: encoded, Message: c.Message,
	}
	if !ref.IsTag() {
		return out, nil
	}
	out.ReferencingTag = &fluxgit.Tag{Name: ref.Short()} // a lightweight tag
	if tag != nil {
		encoded, err := unsigned(tag.EncodeWithoutSignature)
		if err != nil {
			return nil, fmt.Errorf("encoding tag %s: %w", tag.Name, err)
		}
		out.ReferencingTag = &fluxgit.Tag{
			Hash: fluxgit.Hash(tag.Hash.String()), Name: tag.Name, Author: signature(tag.Tagger),
			Signature: tag.PGPSignature, Encoded: encoded, Message: tag.Message,
		}
	}
	return out, nil
}

// unsigned returns the bytes encode writes: a Git object without its
// signature, the payload the signature was made over.
func unsigned(encode func(plumbing.EncodedObject) error) ([]byte, error) {
	o := &plumbing.MemoryObject{}
	if err := encode(o); err != nil {
		return nil, err
	}
	r, err := o.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

func signature(s object.Signature) fluxgit.Signature {
	return fluxgit.Signature{Name: s.Name, Email: s.Email, When: s.When}
}
