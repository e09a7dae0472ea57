package source_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/runner/source"
)

// fetcher serves archives by commit and counts downloads.
type fetcher struct {
	archives map[string][]byte
	calls    map[string]int
	// breakFirst cuts the first download of each commit short.
	breakFirst bool
}

func (f *fetcher) of(sha string) func(context.Context) (io.ReadCloser, error) {
	return func(context.Context) (io.ReadCloser, error) {
		f.calls[sha]++
		b, ok := f.archives[sha]
		if !ok {
			return nil, source.ErrNotFound
		}
		if f.breakFirst && f.calls[sha] == 1 {
			b = b[:len(b)/2]
		}
		return io.NopCloser(bytes.NewReader(b)), nil
	}
}

// TestCacheLRU: trees are reused by commit, evicted least recently used
// first once the cache passes its bound, never while in use; a download
// that breaks off is retried; an archive of another commit is refused.
func TestCacheLRU(t *testing.T) {
	r := newGitRepo(t)
	var shas []string
	for i, body := range []string{strings.Repeat("a", 3000), strings.Repeat("b", 3000), strings.Repeat("c", 3000)} {
		r.write("blob.txt", body, 0o644)
		r.write("n.txt", string(rune('0'+i)), 0o644)
		shas = append(shas, r.commit("c"))
	}
	f := &fetcher{archives: map[string][]byte{}, calls: map[string]int{}, breakFirst: true}
	for _, s := range shas {
		f.archives[s] = r.archive(s)
	}
	dir := t.TempDir()
	// Room for two trees of ~3 kB.
	c, err := source.NewCache(dir, 7000, source.Limits{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	var evicted []string
	c.OnEvict = func(sha, home string) { evicted = append(evicted, sha) }
	ctx := context.Background()

	a, err := c.Get(ctx, shas[0], f.of(shas[0]))
	if err != nil {
		t.Fatal(err)
	}
	if a.Reused || f.calls[shas[0]] != 2 {
		t.Errorf("first get: reused %v after %d downloads, want a fresh tree after a broken first download", a.Reused, f.calls[shas[0]])
	}
	if b, err := os.ReadFile(filepath.Join(a.Dir, "n.txt")); err != nil || string(b) != "0" {
		t.Fatalf("tree of %s: %q %v", shas[0], b, err)
	}
	again, err := c.Get(ctx, shas[0], f.of(shas[0]))
	if err != nil || !again.Reused || again.Tree.Digest != a.Tree.Digest || f.calls[shas[0]] != 2 {
		t.Errorf("second get: reused %v, %d downloads, %v", again.Reused, f.calls[shas[0]], err)
	}
	again.Release()
	a.Release()

	time.Sleep(20 * time.Millisecond) // distinct use times
	b, err := c.Get(ctx, shas[1], f.of(shas[1]))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	// The third tree passes the bound: the least recently used (shas[0])
	// goes; shas[1] is in use and stays.
	third, err := c.Get(ctx, shas[2], f.of(shas[2]))
	if err != nil {
		t.Fatal(err)
	}
	if len(evicted) != 1 || evicted[0] != shas[0] {
		t.Errorf("evicted %v, want only %s", evicted, shas[0])
	}
	if _, err := os.Stat(filepath.Join(dir, shas[0])); !os.IsNotExist(err) {
		t.Errorf("evicted tree still on disk: %v", err)
	}
	for _, co := range []*source.Checkout{b, third} {
		if _, err := os.Stat(co.Dir); err != nil {
			t.Errorf("tree in use was removed: %v", err)
		}
		co.Release()
	}

	// An archive that says it is another commit is refused.
	wrong := &fetcher{archives: map[string][]byte{shas[0]: f.archives[shas[1]]}, calls: map[string]int{}}
	if _, err := c.Get(ctx, shas[0], wrong.of(shas[0])); !errors.Is(err, source.ErrRefused) || !strings.Contains(err.Error(), "holds commit "+shas[1]) {
		t.Errorf("archive of the wrong commit: %v", err)
	}
	// A missing commit is the fetcher's error, not retried.
	missing := strings.Repeat("f", 40)
	if _, err := c.Get(ctx, missing, f.of(missing)); !errors.Is(err, source.ErrNotFound) || f.calls[missing] != 1 {
		t.Errorf("missing commit: %v after %d calls", err, f.calls[missing])
	}
	if _, err := c.Get(ctx, "../x", f.of("../x")); err == nil {
		t.Error("a non-commit key was accepted")
	}

	// A reopened cache drops partial downloads and keeps complete trees.
	if err := os.MkdirAll(filepath.Join(dir, ".tmp-partial", "tree"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, strings.Repeat("e", 40), "tree"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := source.NewCache(dir, 7000, source.Limits{}, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 2 {
		t.Errorf("reopened cache holds %v, want the two complete trees only", names)
	}
}
