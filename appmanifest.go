// Package perfgate holds the files at the repository's root that the
// program embeds. The code is under cmd/ and internal/.
package perfgate

import "embed"

// AppManifest is app.yml, the GitHub App manifest: the events perfgate
// subscribes to and the least permissions it needs. internal/github/setup turns it
// into the JSON manifest that `perfgate serve` posts to GitHub.
//
//go:embed app.yml
var AppManifest []byte

// Webhooks holds testdata/webhooks: the webhook payloads GitHub sends, as
// fixtures for the tests and for `perfgate demo`. Embedded, the demo runs
// from a binary built anywhere (-trimpath included), not only inside a
// checkout.
//
//go:embed testdata/webhooks/*/*.json
var Webhooks embed.FS
