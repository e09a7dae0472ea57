package githubtest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"

	perfgate "github.com/perfgate/perfgate"
)

// Sign returns the X-Hub-Signature-256 value GitHub sends for body:
// "sha256=" and the hex HMAC-SHA256 of the raw body under secret.
func Sign(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// NewDelivery builds a webhook delivery the way GitHub sends one: a JSON POST
// to target with the event, delivery GUID and signature headers. An empty
// secret leaves the signature header off, for testing unsigned requests.
func NewDelivery(target, event, deliveryID string, body, secret []byte) (*http.Request, error) {
	req, err := http.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/perfgate-test")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", deliveryID)
	req.Header.Set("X-GitHub-Hook-ID", "1")
	req.Header.Set("X-GitHub-Hook-Installation-Target-Type", "integration")
	if len(secret) > 0 {
		req.Header.Set("X-Hub-Signature-256", Sign(secret, body))
	}
	return req, nil
}

// Fixture returns the webhook payload testdata/webhooks/<name>, e.g.
// Fixture("pull_request/opened.json"). The payloads are embedded in the
// binary, so they do not depend on where it was built.
func Fixture(name string) ([]byte, error) {
	b, err := fs.ReadFile(perfgate.Webhooks, "testdata/webhooks/"+name)
	if err != nil {
		return nil, fmt.Errorf("read webhook fixture %s: %w", name, err)
	}
	return b, nil
}
