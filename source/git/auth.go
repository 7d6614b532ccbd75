package git

import (
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/cozystack/cozy-aio/source"
)

// method turns Auth into a go-git auth method for the URL's scheme. The
// returned cleanup removes the temporary known_hosts file.
func (a Auth) method(ep *transport.Endpoint) (transport.AuthMethod, func(), error) {
	nop := func() {}
	switch ep.Protocol {
	case "ssh":
		if len(a.SSHPrivateKey) == 0 {
			return nil, nop, nil
		}
		return a.sshMethod(ep)
	case "http", "https":
		switch {
		case a.BearerToken != "":
			return &githttp.TokenAuth{Token: a.BearerToken}, nop, nil
		case a.Username != "" || a.Password != "":
			return &githttp.BasicAuth{Username: a.Username, Password: a.Password}, nop, nil
		}
	}
	return nil, nop, nil
}

func (a Auth) sshMethod(ep *transport.Endpoint) (transport.AuthMethod, func(), error) {
	nop := func() {}
	if len(a.KnownHosts) == 0 {
		return nil, nop, fmt.Errorf("%w: ssh needs known_hosts to verify %s", source.ErrAuth, ep.Host)
	}
	user := ep.User
	if user == "" {
		user = a.SSHUser
	}
	if user == "" {
		user = "git"
	}
	pk, err := gitssh.NewPublicKeys(user, a.SSHPrivateKey, a.SSHPassphrase)
	if err != nil {
		return nil, nop, fmt.Errorf("%w: ssh key: %w", source.ErrAuth, err)
	}
	// knownhosts reads files only.
	f, err := os.CreateTemp("", "known_hosts-")
	if err != nil {
		return nil, nop, err
	}
	cleanup := func() { os.Remove(f.Name()) }
	_, err = f.Write(a.KnownHosts)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	var cb ssh.HostKeyCallback
	if err == nil {
		cb, err = knownhosts.New(f.Name())
	}
	if err != nil {
		cleanup()
		return nil, nop, fmt.Errorf("known_hosts: %w", err)
	}
	pk.HostKeyCallback = func(host string, remote net.Addr, key ssh.PublicKey) error {
		if err := cb(host, remote, key); err != nil {
			var ke *knownhosts.KeyError
			if errors.As(err, &ke) {
				return fmt.Errorf("%w: host key of %s: %w", source.ErrAuth, host, err)
			}
			return err
		}
		return nil
	}
	return pk, cleanup, nil
}
