package perfgate

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const mod = "github.com/perfgate/perfgate/"

// leafAnalysis in a rule allows an analysis package that imports nothing
// of the module.
const leafAnalysis = "leaf internal/analysis/"

// The halves of internal/, by folder, and what each may import
// (docs/architecture.md). A package is covered by its folder the day it
// is added: one outside every folder below is a failure too.
var halves = []struct {
	prefix string
	may    []string // prefixes its production code may import
}{
	// The vocabulary at the bottom: wire types, the config, the check's
	// phases, a result file's shape, the one number formatter. It may name
	// the types of a leaf analysis package — one that imports nothing of
	// the module (capacity's plan, soak's thresholds, fleet's cards) —
	// which cannot reach back up.
	{"internal/vocab/", []string{"internal/vocab/", leafAnalysis}},
	// Pure decisions: nothing that reads the store, calls GitHub or
	// starts a process.
	{"internal/analysis/", []string{"internal/vocab/", "internal/analysis/"}},
	{"internal/store", []string{"internal/vocab/", "internal/analysis/", "internal/store"}},
	// What runs on the GPU host: never the store, never the GitHub loop.
	{"internal/runner/", []string{"internal/vocab/", "internal/analysis/", "internal/runner/"}},
	// The GitHub loop and the server: never the runner.
	{"internal/github/", []string{"internal/vocab/", "internal/analysis/", "internal/store", "internal/github/"}},
	// Around the halves: the demo wires all of them; test support.
	{"internal/demo", nil},
	{"internal/poll", []string{}},
	{"internal/browsertest", []string{}},
	{"internal/logging", []string{}},
}

// TestLayering checks every production import inside the module against
// the rules by folder, and keeps testing (and the test helpers) out of the
// binary.
func TestLayering(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH: " + err.Error())
	}
	graph := goList(t, "./...")
	for _, v := range violations(graph) {
		t.Error(v)
	}
	// testing, httptest and the fake GitHub's test helpers stay out of the
	// binary. One library is let through: golang-lru v1 (go-githubapp's
	// client cache) ships a non-test testing.go, which links testing's
	// package init and nothing else (13 KB of a 45 MB binary, no flags:
	// nothing calls testing.Init); a patched copy cost more than that.
	allowed := map[string]string{"github.com/hashicorp/golang-lru": "testing"}
	for pkg, imports := range goListDeps(t, "./cmd/perfgate") {
		for _, banned := range []string{"testing", "net/http/httptest", mod + "internal/github/githubtest/ghtest"} {
			if imports[banned] && allowed[pkg] != banned {
				t.Errorf("%s, linked into cmd/perfgate, imports %s", pkg, banned)
			}
		}
	}
}

// A wrong-way import is caught: the rules are not vacuous.
func TestLayeringCatchesPlantedImports(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ from, to string }{
		{"internal/analysis/gate", "internal/store"},
		{"internal/analysis/gate", "internal/github/dispatch"},
		{"internal/runner/agent", "internal/store"},
		{"internal/runner/agent", "internal/github/agentserver"},
		{"internal/github/dispatch", "internal/runner/agent"},
		{"internal/vocab/result", "internal/github/app"},
		{"internal/store", "internal/github/app"},
		{"internal/newthing", "internal/vocab/check"},
	} {
		graph := map[string][]string{mod + tc.from: {mod + tc.to}, mod + tc.to: nil}
		if len(violations(graph)) == 0 {
			t.Errorf("%s → %s was not caught", tc.from, tc.to)
		}
	}
	if v := violations(map[string][]string{mod + "internal/github/dispatch": {mod + "internal/analysis/gate", mod + "internal/store"}, mod + "internal/analysis/gate": nil, mod + "internal/store": nil}); len(v) > 0 {
		t.Errorf("allowed imports refused: %v", v)
	}
	// The vocabulary may name a leaf analysis package's types, not one
	// that imports anything.
	leaf := map[string][]string{mod + "internal/vocab/config": {mod + "internal/analysis/capacity"}, mod + "internal/analysis/capacity": nil}
	if v := violations(leaf); len(v) > 0 {
		t.Errorf("a leaf import refused: %v", v)
	}
	leaf[mod+"internal/analysis/capacity"] = []string{mod + "internal/analysis/stats"}
	leaf[mod+"internal/analysis/stats"] = nil
	if len(violations(leaf)) == 0 {
		t.Error("the vocabulary importing a non-leaf analysis package was not caught")
	}
}

// violations lists the imports of graph (package → its module imports)
// that its folder's rule forbids, and the packages no folder covers.
func violations(graph map[string][]string) []string {
	var out []string
	for pkg, imports := range graph {
		rel := strings.TrimPrefix(pkg, mod)
		if !strings.HasPrefix(rel, "internal/") {
			continue // cmd/, templates, docs, deploy: the top wires the halves
		}
		rule := -1
		for i, h := range halves {
			if under(rel, h.prefix) {
				rule = i
				break
			}
		}
		if rule < 0 {
			out = append(out, rel+" is in no half: put it under internal/vocab, analysis, runner, github or store (docs/architecture.md)")
			continue
		}
		if halves[rule].may == nil {
			continue
		}
		for _, imp := range imports {
			irel, ok := strings.CutPrefix(imp, mod)
			if !ok || !strings.HasPrefix(irel, "internal/") {
				continue
			}
			allowed := func(p string) bool {
				if p == leafAnalysis {
					return under(irel, "internal/analysis/") && len(graph[imp]) == 0
				}
				return under(irel, p)
			}
			if !slices.ContainsFunc(halves[rule].may, allowed) {
				out = append(out, rel+" imports "+irel+": "+halves[rule].prefix+" may import only "+strings.Join(halves[rule].may, ", "))
			}
		}
	}
	slices.Sort(out)
	return out
}

// under reports whether a package path is the folder prefix or inside it
// ("internal/store" covers internal/store/storetest).
func under(pkg, prefix string) bool {
	p := strings.TrimSuffix(prefix, "/")
	return pkg == p || strings.HasPrefix(pkg, p+"/")
}

// goList maps every package of pattern to its module imports (production
// code only).
func goList(t *testing.T, pattern string) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", pattern).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pattern, err)
	}
	graph := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		var imps []string
		for _, f := range fields[1:] {
			if strings.HasPrefix(f, mod) {
				imps = append(imps, f)
			}
		}
		graph[fields[0]] = imps
	}
	return graph
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
