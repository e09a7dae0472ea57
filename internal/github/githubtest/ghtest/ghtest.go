// Package ghtest holds the helpers tests use around the fake GitHub of
// internal/github/githubtest: a fake bound to a test's lifetime, webhook fixtures
// and git repositories built commit by commit. They take a testing.TB, so
// only tests import this package; the fake itself (githubtest) links no
// testing code and also serves perfgate demo.
package ghtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/perfgate/perfgate/internal/github/githubtest"
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

// Fixture reads testdata/webhooks/<name>, e.g. Fixture(t,
// "pull_request/opened.json"): from the fixtures the binary embeds, else —
// for the test-only sets the binary does not carry, such as
// "published/…" — from the checkout the test runs in.
func Fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := githubtest.Fixture(name)
	if err == nil {
		return b
	}
	root, rerr := repoRoot()
	if rerr != nil {
		t.Fatalf("%v; and no checkout to read it from: %v", err, rerr)
	}
	b, ferr := os.ReadFile(filepath.Join(root, "testdata", "webhooks", filepath.FromSlash(name)))
	if ferr != nil {
		t.Fatalf("read webhook fixture %s: %v", name, ferr)
	}
	return b
}

// repoRoot is the checkout holding this file: the nearest folder above it
// with a go.mod.
func repoRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("no caller information")
	}
	for dir := filepath.Dir(file); ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no go.mod above %s", file)
		}
	}
}
