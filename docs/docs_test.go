package docs

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/perfgate/perfgate/internal/github/server"
)

var update = flag.Bool("update", false, "rewrite the generated parts of the pages")

// pending are pages other work of issue 24 writes at the same time as
// this manual; a link to one is allowed to dangle until it lands. Empty
// this list once they are all merged.
var pending = []string{}

const (
	settingsBegin = "<!-- settings:begin — generated from server.Settings by `go generate ./docs`; do not edit -->\n"
	settingsEnd   = "<!-- settings:end -->\n"
)

// TestSettingsTable fails when the settings table in operations.md is not
// the one server.Settings renders; -update rewrites it.
func TestSettingsTable(t *testing.T) {
	const page = "operations.md"
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	got, err := between(string(b), settingsBegin, settingsEnd)
	if err != nil {
		t.Fatalf("%s: %v", page, err)
	}
	want := server.SettingsMarkdown()
	if got == want {
		return
	}
	if *update {
		updated := strings.Replace(string(b), settingsBegin+got+settingsEnd, settingsBegin+want+settingsEnd, 1)
		if err := os.WriteFile(page, []byte(updated), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s: the settings table differs from server.Settings; run `go generate ./docs` (or go test ./docs -run TestSettingsTable -update)\n--- in the page\n%s\n--- generated\n%s", page, got, want)
}

// TestFileOnlySettingsDescribed fails when a server.yml key without a
// variable is listed by the generator but not described in the page's
// own table of them.
func TestFileOnlySettingsDescribed(t *testing.T) {
	b, err := os.ReadFile("operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(b), settingsEnd)
	for _, k := range server.FileOnlyKeys() {
		if !strings.Contains(rest, "| `"+k+"` |") {
			t.Errorf("operations.md: server.yml key %s has no row in the table after the generated one", k)
		}
	}
}

func between(s, begin, end string) (string, error) {
	_, after, ok := strings.Cut(s, begin)
	if !ok {
		return "", fmt.Errorf("no line %q", strings.TrimSpace(begin))
	}
	inside, _, ok := strings.Cut(after, end)
	if !ok {
		return "", fmt.Errorf("no line %q after the begin marker", strings.TrimSpace(end))
	}
	return inside, nil
}

// TestLinks checks every relative link of README.md and docs/*.md: the
// file exists, and an anchor names a heading of the page it points to.
func TestLinks(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join("..", "README.md"))
	for _, p := range pages {
		for _, bad := range brokenLinks(t, p) {
			t.Errorf("%s", bad)
		}
	}
}

// TestLinkChecker runs the checker on fixtures whose broken links are
// known, so a checker that finds nothing fails.
func TestLinkChecker(t *testing.T) {
	got := brokenLinks(t, filepath.Join("testdata", "links", "page.md"))
	want := []string{
		"testdata/links/page.md:11: nope.md: no such file",
		"testdata/links/page.md:11: other.md#nowhere: no heading with that anchor",
		"testdata/links/page.md:11: #not-here: no heading with that anchor",
		"testdata/links/page.md:12: pending.md: no such file",
	}
	if !slices.Equal(got, want) {
		t.Errorf("broken links:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := brokenLinks(t, filepath.Join("testdata", "links", "other.md")); len(got) > 0 {
		t.Errorf("other.md: %v, want none", got)
	}
}

var linkRE = regexp.MustCompile(`\]\(([^()\s]+)\)`)

// brokenLinks lists page's relative links that do not resolve, as
// "page:line: target: why". Links inside code (fences and spans) are not
// links.
func brokenLinks(t *testing.T, page string) []string {
	t.Helper()
	text, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	fence := false
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(withoutCodeSpans(line), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if why := resolve(t, page, target); why != "" {
				bad = append(bad, fmt.Sprintf("%s:%d: %s: %s", filepath.ToSlash(page), n, target, why))
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", page, err)
	}
	return bad
}

// resolve says why target, linked from page, does not resolve ("" when
// it does).
func resolve(t *testing.T, page, target string) string {
	file, anchor, _ := strings.Cut(target, "#")
	dest := page
	if file != "" {
		dest = filepath.Join(filepath.Dir(page), filepath.FromSlash(file))
		if _, err := os.Stat(dest); err != nil {
			if inDocs(dest) && slices.Contains(pending, filepath.Base(file)) {
				t.Logf("%s: %s is another change's page, not here yet", page, file)
				return ""
			}
			return "no such file"
		}
	}
	if anchor == "" || !strings.HasSuffix(dest, ".md") {
		return ""
	}
	text, err := os.ReadFile(dest)
	if err != nil {
		return err.Error()
	}
	if !slices.Contains(anchors(string(text)), anchor) {
		return "no heading with that anchor"
	}
	return ""
}

// inDocs says whether path lies directly in this directory (docs/).
func inDocs(path string) bool {
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return false
	}
	here, err := filepath.Abs(".")
	return err == nil && dir == here
}

// anchors lists the ids GitHub gives a page's headings: the heading's
// text, lower-cased, without punctuation, spaces as hyphens, and -1, -2 …
// after repeats.
func anchors(text string) []string {
	var ids []string
	seen := map[string]int{}
	fence := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if fence || !strings.HasPrefix(line, "#") {
			continue
		}
		heading := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(heading) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		id := b.String()
		if k := seen[id]; k > 0 {
			ids = append(ids, fmt.Sprintf("%s-%d", id, k))
		} else {
			ids = append(ids, id)
		}
		seen[id]++
	}
	return ids
}

// withoutCodeSpans blanks `code spans`, whose brackets are not links.
func withoutCodeSpans(line string) string {
	parts := strings.Split(line, "`")
	for i := 1; i < len(parts); i += 2 {
		if i < len(parts)-1 { // an unclosed backtick is not a span
			parts[i] = strings.Repeat(" ", len(parts[i]))
		}
	}
	return strings.Join(parts, "`")
}

// codeURLRE matches the links perfgate's code posts into its own
// repository's manual (check runs, comments).
var codeURLRE = regexp.MustCompile(`https://github\.com/perfgate/perfgate(/blob/main/[^\s"'#)]+)?(#[\w-]+)?`)

// TestCodeLinksResolve checks the manual's addresses that the Go code
// posts on GitHub: a "not configured" check links the configuration
// section, and a page or heading that moved would leave it dangling.
func TestCodeLinksResolve(t *testing.T) {
	found := 0
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range codeURLRE.FindAllStringSubmatch(string(b), -1) {
			found++
			file := "README.md"
			if m[1] != "" {
				file = strings.TrimPrefix(m[1], "/blob/main/")
			}
			if why := resolve(t, filepath.Join("..", "README.md"), file+m[2]); why != "" {
				t.Errorf("%s: %s: %s", path, m[0], why)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		t.Error("no link into the manual found in the code; the pattern is out of date")
	}
}

// TestLibrariesListed fails when a direct dependency in go.mod has no row
// in the README's "Libraries, and why" (or a row outlives its module).
func TestLibrariesListed(t *testing.T) {
	mod, err := os.ReadFile(filepath.Join("..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, libs, ok := strings.Cut(string(readme), "## Libraries, and why\n")
	if !ok {
		t.Fatal(`README.md: no "## Libraries, and why" section`)
	}
	libs, _, _ = strings.Cut(libs, "\n## ")
	direct := 0
	for _, line := range strings.Split(string(mod), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || strings.Contains(line, "// indirect") || !strings.Contains(f[0], ".") || f[0] == "module" || f[0] == "go" {
			continue
		}
		if f[0] == "require" { // a one-line require
			f = f[1:]
		}
		direct++
		name := strings.TrimPrefix(f[0], "github.com/")
		if !strings.Contains(libs, "`"+name) {
			t.Errorf("go.mod requires %s directly; README.md's \"Libraries, and why\" has no row naming `%s` and why", f[0], name)
		}
	}
	if direct == 0 {
		t.Error("found no direct dependency in go.mod; the parser is out of date")
	}
}

// TestCIRunsTheReadmeCommands: the README's quick start is two commands,
// the demo and the test suite, and .ci/run runs exactly that test command
// (the brief's "two commands on a fresh machine").
func TestCIRunsTheReadmeCommands(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "## Quick start")
	if !ok {
		t.Fatal("README.md has no Quick start section")
	}
	_, block, ok := strings.Cut(rest, "```sh\n")
	if !ok {
		t.Fatal("README.md's Quick start has no sh block")
	}
	block, _, _ = strings.Cut(block, "```")
	cmds := strings.Split(strings.TrimSpace(block), "\n")
	if len(cmds) != 2 || cmds[0] != "go run ./cmd/perfgate demo" || !strings.HasPrefix(cmds[1], "go test ") {
		t.Fatalf("README.md's quick start is %q, want the demo and the test command", cmds)
	}
	ci, err := os.ReadFile("../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	var ran []string
	for _, line := range strings.Split(string(ci), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "go test ") {
			ran = append(ran, strings.TrimSpace(line))
		}
	}
	if len(ran) != 1 || !strings.HasPrefix(ran[0], cmds[1]+" ||") {
		t.Errorf(".ci/run runs %q, want exactly the README's %q", ran, cmds[1])
	}
}
