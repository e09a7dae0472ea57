// Package ghtest holds the helpers tests use around the fake GitHub of
// internal/githubtest: a fake bound to a test's lifetime, webhook fixtures
// and git repositories built commit by commit. They take a testing.TB, so
// only tests import this package; the fake itself (githubtest) links no
// testing code and also serves perfgate demo.
package ghtest

import (
	"testing"

	"github.com/perfgate/perfgate/internal/githubtest"
)

// New starts a fake GitHub that knows installation 4242 and closes it when
// the test ends. The app's RSA key is generated once per test binary; no key
// is ever committed.
func New(t testing.TB) *githubtest.Server {
	t.Helper()
	s := githubtest.Start()
	t.Cleanup(s.Close)
	return s
}

// Fixture reads testdata/webhooks/<name> from the repository root, e.g.
// Fixture(t, "pull_request/opened.json").
func Fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := githubtest.Fixture(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
