package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every way a Dockerfile makes the daemon fetch something is refused, with
// the line and what to do instead; builds from local images and the
// commit's own files pass.
func TestCheckDockerfile(t *testing.T) {
	t.Parallel()
	local := map[string][]string{
		"sha256:" + strings.Repeat("a", 64): nil,
		"local-base:1":                      {"ADD http://10.0.0.1/x /x"},
	}
	inspect := func(ref string) (bool, []string, error) {
		on, ok := local[ref]
		return ok, on, nil
	}
	args := map[string]string{"BASE": "sha256:" + strings.Repeat("a", 64)}
	for _, tc := range []struct {
		file string
		line int    // 0: accepted
		says string // in the refusal
	}{
		{"ok-scratch.Dockerfile", 0, ""},
		{"ok-multistage.Dockerfile", 0, ""},
		{"add-url.Dockerfile", 2, "fetches a URL"},
		{"add-url-continued.Dockerfile", 2, "fetches a URL"},
		{"add-url-escape.Dockerfile", 3, "fetches a URL"},
		{"add-url-json.Dockerfile", 2, "fetches a URL"},
		{"add-variable.Dockerfile", 3, "built from a variable"},
		{"add-git.Dockerfile", 2, "fetches a URL"},
		{"add-url-empty-continuation.Dockerfile", 2, "fetches a URL"},
		{"add-url-tab.Dockerfile", 2, "fetches a URL"},
		{"add-url-escaped.Dockerfile", 2, "quotes or escapes"},
		{"add-url-quoted.Dockerfile", 2, "quotes or escapes"},
		{"run-network.Dockerfile", 2, "asks for a network"},
		{"syntax-directive.Dockerfile", -1, "syntax directive"},
		{"from-remote.Dockerfile", 1, "not on this runner"},
		{"from-platform.Dockerfile", 2, "another platform"},
		{"copy-from-image.Dockerfile", 2, "names an image"},
		{"onbuild-add-url.Dockerfile", 2, "ONBUILD: ADD"},
		{"from-unresolved.Dockerfile", 1, "cannot resolve"},
		{"from-onbuild-base.Dockerfile", 1, "ONBUILD trigger ADD"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			f, err := os.Open(filepath.Join("testdata", "dockerfiles", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			err = CheckDockerfile(tc.file, f, args, inspect)
			if tc.line == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if tc.line < 0 { // refused while reading
				if err == nil || !strings.Contains(err.Error(), tc.says) {
					t.Fatalf("err = %v, want %q", err, tc.says)
				}
				return
			}
			var be *BuildError
			if !errors.As(err, &be) || be.Line != tc.line || !strings.Contains(be.Msg, tc.says) {
				t.Fatalf("err = %v, want a refusal of line %d saying %q", err, tc.line, tc.says)
			}
		})
	}
}

// The command line: the context is a directory of the checkout, the
// Dockerfile is read inside it, and no pull is asked for.
func TestCheckBuildCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "docker"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"Dockerfile": "FROM scratch\n", "docker/Dockerfile.evil": "FROM scratch\nADD http://10.0.0.1/ /x\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "docker", "escape")); err != nil {
		t.Fatal(err)
	}
	none := func(string) (bool, []string, error) { return false, nil, nil }
	for _, tc := range []struct {
		args []string
		says string // "" accepted
	}{
		{[]string{"--network=none", "-t", "x", "."}, ""},
		{[]string{"-f", "docker/Dockerfile.evil", "."}, "fetches a URL"},
		{[]string{"--file=docker/Dockerfile.evil", "."}, "fetches a URL"},
		{[]string{"-f", "docker/escape", "."}, "inside the checkout"},
		{[]string{"-f", "../../etc/passwd", "."}, "inside the checkout"},
		{[]string{"--pull", "."}, "pull"},
		{[]string{"--allow", "network.host", "."}, "entitlement"},
		{[]string{"--ssh", "default", "."}, "credential"},
		{[]string{"--secret=id=aws,src=/root/.aws/credentials", "."}, "credential"},
		{[]string{"--platform=linux/arm64", "."}, "platform"},
		{[]string{"https://example.com/repo.git"}, "not a directory"},
		{[]string{"-f", "-", "."}, "stdin"},
		{[]string{".", "--quiet"}, "build context"},
	} {
		err := CheckBuild(tc.args, dir, none)
		if tc.says == "" {
			if err != nil {
				t.Errorf("%q refused: %v", tc.args, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%q: err = %v, want %q", tc.args, err, tc.says)
		}
	}
}
