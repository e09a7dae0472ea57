package githubtest_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/github/githubtest"
)

// The fixtures come from the binary, not from the build's source tree: a
// binary built with -trimpath (deploy/image/prepare) and run from anywhere
// reads them. Every payload under testdata/webhooks is embedded, byte for
// byte.
func TestFixturesAreEmbedded(t *testing.T) {
	root := filepath.Join("..", "..", "..", "testdata", "webhooks")
	files, err := filepath.Glob(filepath.Join(root, "*", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures under %s: %v", root, err)
	}
	disk := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		disk[filepath.ToSlash(rel)] = b
	}
	// Away from the checkout, as an installed binary runs.
	t.Chdir(t.TempDir())
	for name, want := range disk {
		got, err := githubtest.Fixture(name)
		if err != nil {
			t.Errorf("Fixture(%q): %v", name, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("Fixture(%q) differs from testdata/webhooks/%s", name, name)
		}
	}
	for _, tt := range []struct{ name, want string }{
		{"pull_request/nope.json", "read webhook fixture pull_request/nope.json"},
		{"../app.yml", "read webhook fixture ../app.yml"},
	} {
		if _, err := githubtest.Fixture(tt.name); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Fixture(%q) = %v, want an error saying %q", tt.name, err, tt.want)
		}
	}
}
