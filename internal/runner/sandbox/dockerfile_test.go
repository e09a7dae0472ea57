package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Explain reads a Dockerfile with BuildKit's parser and names each line
// that asks for what a build on perfgate's runners cannot have; a
// Dockerfile built from local images and the commit's own files has
// nothing to explain. (Explain decides nothing: the sealed builder does.)
func TestExplain(t *testing.T) {
	t.Parallel()
	local := func(ref string) bool { return ref == "local-base:1" || ref == "sha256:"+strings.Repeat("a", 64) }
	args := map[string]string{"BASE": "sha256:" + strings.Repeat("a", 64)}
	for _, tc := range []struct {
		file string
		line int    // 0: nothing to explain
		says string // in the finding
		text string // the quoted line holds this
	}{
		{"ok-scratch.Dockerfile", 0, "", ""},
		{"ok-multistage.Dockerfile", 0, "", ""},
		{"add-url.Dockerfile", 2, "fetches a URL", "ADD http://169.254.169.254/"},
		{"add-url-continued.Dockerfile", 2, "fetches a URL", "ADD"},
		{"add-url-escape.Dockerfile", 3, "fetches a URL", "ADD"},
		{"add-url-json.Dockerfile", 2, "fetches a URL", "ADD"},
		{"add-variable.Dockerfile", 3, "built from a variable", "ADD ${U}"},
		{"add-git.Dockerfile", 2, "fetches a URL", "ADD"},
		{"add-url-empty-continuation.Dockerfile", 2, "fetches a URL", "ADD"},
		{"add-url-tab.Dockerfile", 2, "fetches a URL", "ADD"},
		{"add-url-escaped.Dockerfile", 2, "quotes or escapes", "ADD"},
		{"add-url-quoted.Dockerfile", 2, "quotes or escapes", "ADD"},
		{"run-network.Dockerfile", 2, "asks for a network", "RUN --network"},
		{"syntax-directive.Dockerfile", 1, "syntax directive", "# syntax="},
		{"from-remote.Dockerfile", 1, "not on this runner", "FROM"},
		{"copy-from-image.Dockerfile", 2, "not on this runner", "COPY --from"},
		{"onbuild-add-url.Dockerfile", 2, "fetches a URL", "ONBUILD ADD"},
		{"from-unresolved.Dockerfile", 1, "cannot resolve", "FROM $UNSET"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			b, err := os.ReadFile(filepath.Join("testdata", "dockerfiles", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			fs := Explain(tc.file, b, args, local)
			if tc.line == 0 {
				if len(fs) != 0 {
					t.Fatalf("explained %v", fs)
				}
				return
			}
			if len(fs) == 0 || fs[0].Line != tc.line || !strings.Contains(fs[0].Msg, tc.says) || !strings.Contains(strings.ToUpper(fs[0].Text), strings.ToUpper(tc.text)) {
				t.Fatalf("findings %v, want line %d quoting %q saying %q", fs, tc.line, tc.text, tc.says)
			}
		})
	}
}

// Images names what the builder needs copied in: FROM and COPY --from
// images, build args and ARG defaults expanded, never the file's stages.
func TestImages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		dockerfile string
		args       map[string]string
		want       []string
	}{
		{"FROM scratch\n", nil, nil},
		{"ARG BASE=a:1\nFROM ${BASE} AS build\nFROM build\nCOPY --from=build /x /x\nCOPY --from=0 /x /y\nCOPY --from=b:2 /x /z\n", nil, []string{"a:1", "b:2"}},
		{"ARG BASE=a:1\nFROM $BASE\n", map[string]string{"BASE": "given:3"}, []string{"given:3"}},
		{"\ufeffFROM bom:1\n", nil, []string{"bom:1"}},
	} {
		got := Images([]byte(tc.dockerfile), tc.args)
		if !slices.Equal(got, tc.want) {
			t.Errorf("Images(%q) = %q, want %q", tc.dockerfile, got, tc.want)
		}
	}
}

// The command line: the context is a directory of the checkout, the
// Dockerfile is read inside it, and no credential or entitlement of the
// runner is handed to the build.
func TestCheckBuildCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "docker"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"Dockerfile": "FROM scratch\n", "docker/Dockerfile.other": "FROM scratch\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "docker", "escape")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		says string // "" accepted
		file string // the Dockerfile it names, when accepted
	}{
		{[]string{"--network=none", "-t", "x", "."}, "", "Dockerfile"},
		{[]string{"-f", "docker/Dockerfile.other", "."}, "", "docker/Dockerfile.other"},
		{[]string{"--file=docker/Dockerfile.other", "."}, "", "docker/Dockerfile.other"},
		{[]string{"-f", "docker/escape", "."}, "inside the checkout", ""},
		{[]string{"-f", "../../../etc/passwd", "."}, "outside the checkout", ""},
		{[]string{"-f", "/etc/passwd", "."}, "outside the checkout", ""},
		{[]string{"--allow", "network.host", "."}, "entitlement", ""},
		{[]string{"--ssh", "default", "."}, "credential", ""},
		{[]string{"--secret=id=aws,src=/root/.aws/credentials", "."}, "credential", ""},
		{[]string{"https://example.com/repo.git"}, "not a directory", ""},
		{[]string{"-f", "-", "."}, "stdin", ""},
		{[]string{".", "--quiet"}, "build context", ""},
	} {
		spec, err := CheckBuild(tc.args, dir)
		if tc.says == "" {
			if err != nil || spec.Dockerfile != tc.file {
				t.Errorf("%q: %+v, %v; want %s", tc.args, spec, err, tc.file)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%q: err = %v, want %q", tc.args, err, tc.says)
		}
	}
}
