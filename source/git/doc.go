// Package git fetches Git repositories with go-git into the artifact store.
//
// A fetch resolves the reference with ls-remote first and stops there when
// the revision equals the last one stored; otherwise it makes a shallow
// clone of that one reference, archives the tree and stores it:
//
//	res, err := git.Fetch(ctx, store, obj, "https://github.com/org/repo", git.Options{
//		Ref:          git.Ref{Branch: "main"},
//		Auth:         git.Auth{Username: "git", Password: token},
//		LastRevision: previous.Revision,
//	})
//	// res.Revision is "main@sha1:<commit>"; res.Unchanged tells whether
//	// res.Artifact is new.
//
// FetchRevision rebuilds the artifact of a revision Fetch returned earlier,
// even after its branch or tag has moved: the same commit and ignore
// patterns give the same digest, so another process can recreate an
// artifact named in a status and check it against the recorded digest.
//
// Revisions have Flux's format: "<branch>@sha1:<commit>" for a branch,
// "<tag>@sha1:<commit>" for a tag or a semver range, "<refname>@sha1:<commit>"
// for a full reference name, and "sha1:<commit>" for a bare commit.
// Errors wrap source.ErrUnreachable, source.ErrAuth, source.ErrRefNotFound
// and source.ErrNoSemverMatch.
//
// Every connection a fetch makes goes through Options.Dial, over HTTP(S)
// and SSH; URLs of other schemes are refused. go-git has no per-call
// transport, so importing this package installs, in go-git's table of
// transports, an HTTP(S) transport that serves this package's calls with
// their own dialer and passes every other go-git call to the transport it
// replaced.
package git
