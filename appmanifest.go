// Package perfgate holds the files at the repository's root that the
// program embeds. The code is under cmd/ and internal/.
package perfgate

import _ "embed"

// AppManifest is app.yml, the GitHub App manifest: the events perfgate
// subscribes to and the least permissions it needs. internal/setup turns it
// into the JSON manifest that `perfgate serve` posts to GitHub.
//
//go:embed app.yml
var AppManifest []byte
