// Package redact removes secrets from text that leaves the engine: error
// messages, conditions, events and logs. Every package uses the same rule,
// so that what counts as a secret does not depend on which part failed.
//
// String masks what has the shape of a credential wherever it appears in a
// text: URL userinfo of any scheme, credential query parameters,
// Authorization headers, Bearer and Basic credentials, kubeconfig and
// YAML/JSON key material, PEM private keys, age secret keys and the token
// part of chat webhook URLs. Values masks the exact values a caller knows (a
// Secret's data), raw, base64-encoded and URL-escaped. Error wraps an error
// so that its message is redacted while errors.Is and errors.As still see
// the chain.
//
//	msg := redact.String("GET https://user:s3cret@charts.example.com/index.yaml")
//	// GET https://***@charts.example.com/index.yaml
//	err = redact.Error(fmt.Errorf("git %s: %w", repoURL, err), []byte(password))
//
// The rule matches shapes, not meaning: a word that follows "token:" in
// prose is masked too, since a leaked credential costs more than a lost
// word.
package redact
