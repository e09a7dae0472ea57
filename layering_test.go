package perfgate

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLayering guards the direction of the imports (docs/architecture.md):
// the vocabulary sits below the GitHub layer and the store, the domain
// never imports the GitHub layer, the runner never imports the database
// package, and the production binary links no test helpers.
func TestLayering(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH: " + err.Error())
	}
	const mod = "github.com/perfgate/perfgate/"
	tests := []struct {
		pkg    string
		banned []string // packages pkg must not depend on, directly or not
	}{
		{"./internal/github/dispatch", []string{mod + "internal/github/app", mod + "internal/github/server"}},
		{"./internal/github/bisectjob", []string{mod + "internal/github/app", mod + "internal/github/server"}},
		{"./internal/github/checkstate", []string{mod + "internal/github/app", mod + "internal/store"}},
		{"./internal/runner/agent", []string{mod + "internal/store", mod + "internal/github/agentserver", mod + "internal/github/app"}},
		{"./internal/vocab/agentapi", []string{mod + "internal/store"}},
		{"./internal/vocab/check", []string{mod + "internal/github/app", mod + "internal/store", mod + "internal/vocab/config"}},
		{"./internal/vocab/request", []string{mod + "internal/github/app", mod + "internal/store"}},
		{"./internal/vocab/jobstate", []string{mod + "internal/store", mod + "internal/vocab/agentapi"}},
		// testing (and its flags) stays out of the binary; go-githubapp's
		// LRU shipped a testing.go, so go.mod replaces it with a copy
		// without (internal/third_party/golang-lru).
		{"./cmd/perfgate", []string{"testing", "net/http/httptest", mod + "internal/github/githubtest/ghtest"}},
	}
	for _, tt := range tests {
		deps := goListDeps(t, tt.pkg)
		for _, b := range tt.banned {
			if _, ok := deps[b]; ok {
				t.Errorf("%s depends on %s", tt.pkg, b)
			}
		}
	}
	// Name who brings testing in, should it come back.
	for pkg, imports := range goListDeps(t, "./cmd/perfgate") {
		if imports["testing"] {
			t.Errorf("%s, linked into cmd/perfgate, imports testing", pkg)
		}
	}
}

// goListDeps maps every package pkg depends on (itself included) to the
// set of its direct imports.
func goListDeps(t *testing.T, pkg string) map[string]map[string]bool {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	deps := map[string]map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		imports := map[string]bool{}
		for _, f := range fields[1:] {
			imports[f] = true
		}
		deps[fields[0]] = imports
	}
	return deps
}
