package demo

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestParseLDD: the image gets every library ldd resolves and the loader,
// no vdso, and a library ldd could not find is named, not dropped (the
// image would fail at its first exec).
func TestParseLDD(t *testing.T) {
	for _, tc := range []struct {
		file          string
		libs, missing []string
	}{
		{"ldd-ollama.txt", []string{"/lib/x86_64-linux-gnu/libstdc++.so.6", "/lib/x86_64-linux-gnu/libm.so.6",
			"/lib/x86_64-linux-gnu/libgcc_s.so.1", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"}, nil},
		{"ldd-missing.txt", []string{"/lib/x86_64-linux-gnu/libtinfo.so.6", "/lib/x86_64-linux-gnu/libc.so.6",
			"/lib64/ld-linux-x86-64.so.2"}, []string{"libmissing.so.1"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			libs, missing := parseLDD(string(b))
			if !slices.Equal(libs, tc.libs) || !slices.Equal(missing, tc.missing) {
				t.Errorf("parseLDD = %q, missing %q; want %q, missing %q", libs, missing, tc.libs, tc.missing)
			}
		})
	}
}

// TestOllamaEntrypoint: the entrypoint drops the runner's --model and
// runs server.args, and says what to set when there are none.
func TestOllamaEntrypoint(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	script := filepath.Join(t.TempDir(), "entry")
	if err := os.WriteFile(script, []byte(ollamaEntrypoint), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
		ok   bool
	}{
		{[]string{"--model", "perfgate-tiny:latest", "echo", "serve", "8000"}, "serve 8000\n", true},
		{[]string{"echo", "no model"}, "no model\n", true},
		{[]string{"--model", "m"}, "set server.args", false},
	} {
		out, err := exec.Command(bash, append([]string{script}, tc.args...)...).CombinedOutput()
		if (err == nil) != tc.ok || !strings.Contains(string(out), tc.want) {
			t.Errorf("entrypoint %q: %q, %v; want %q (ok %v)", tc.args, out, err, tc.want, tc.ok)
		}
	}
}
