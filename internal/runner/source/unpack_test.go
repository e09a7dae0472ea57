package source_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/runner/source"
)

// ent is one tar entry of a hand-made archive.
type ent struct {
	name, body, link string
	typ              byte
	mode             int64
}

func file(name, body string) ent { return ent{name: name, body: body, typ: tar.TypeReg, mode: 0o644} }

// tgz writes entries as a gzip tar, as a hostile repository could.
func tgz(t testing.TB, ents ...ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range ents {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: e.mode, Size: int64(len(e.body))}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestUnpackRefusesUnsafeArchives: every way an archive could write or
// link outside the work directory, or exhaust it, is refused whole with
// an error naming the entry; nothing lands outside.
func TestUnpackRefusesUnsafeArchives(t *testing.T) {
	const top = "o-r-abc1234/"
	ok := file(top+"README", "hi")
	tests := []struct {
		name string
		ents []ent
		lim  source.Limits
		want string
	}{
		{"absolute path", []ent{ok, file("/etc/evil", "x")}, source.Limits{}, `entry "/etc/evil" has an absolute path`},
		{"dot-dot", []ent{ok, file(top+"../../../evil", "x")}, source.Limits{}, "climbs out of the tree"},
		{"dot-dot in the middle", []ent{ok, file(top+"a/../../evil", "x")}, source.Limits{}, "climbs out of the tree"},
		{"bare dot-dot top", []ent{file("../evil", "x")}, source.Limits{}, "outside the archive's top directory"},
		{"two top directories", []ent{ok, file("other/x", "x")}, source.Limits{}, "a GitHub tarball has one top directory"},
		{"absolute symlink", []ent{ok, {name: top + "l", typ: tar.TypeSymlink, link: "/etc/passwd"}}, source.Limits{}, `points to the absolute path "/etc/passwd"`},
		{"climbing symlink", []ent{ok, {name: top + "a/l", typ: tar.TypeSymlink, link: "../../../x"}}, source.Limits{}, "points outside the tree"},
		{"symlink chain", []ent{ok, {name: top + "q", typ: tar.TypeSymlink, link: "."}, {name: top + "l", typ: tar.TypeSymlink, link: "q/../x"}}, source.Limits{}, `symlink "l" -> "q/../x" resolves outside the tree`},
		{"write through a symlink", []ent{ok, {name: top + "d", typ: tar.TypeSymlink, link: "sub"}, file(top+"d/f", "x")}, source.Limits{}, `lies under the symlink "d"`},
		{"hard link out", []ent{ok, {name: top + "h", typ: tar.TypeLink, link: "/etc/passwd"}}, source.Limits{}, "absolute path"},
		{"hard link climbing", []ent{ok, {name: top + "h", typ: tar.TypeLink, link: top + "../x"}}, source.Limits{}, "climbs out of the tree"},
		{"hard link to nothing", []ent{ok, {name: top + "h", typ: tar.TypeLink, link: top + "missing"}}, source.Limits{}, "not a file of the tree written before it"},
		{"hard link through a symlink", []ent{ok, {name: top + "s", typ: tar.TypeSymlink, link: "."}, {name: top + "h", typ: tar.TypeLink, link: top + "s/README"}}, source.Limits{}, "lies under the symlink"},
		{"char device", []ent{ok, {name: top + "tty", typ: tar.TypeChar}}, source.Limits{}, "is a device or fifo"},
		{"block device", []ent{ok, {name: top + "sda", typ: tar.TypeBlock}}, source.Limits{}, "is a device or fifo"},
		{"fifo", []ent{ok, {name: top + "p", typ: tar.TypeFifo}}, source.Limits{}, "is a device or fifo"},
		{"too many files", []ent{ok, file(top+"a", "1"), file(top+"b", "2")}, source.Limits{MaxFiles: 2}, "more than 2 entries"},
		{"too many bytes", []ent{ok, file(top+"a", "12345"), file(top+"b", "12345")}, source.Limits{MaxBytes: 8}, "the tree is over 8 bytes"},
		{"one file too large", []ent{ok, file(top+"big", "123456")}, source.Limits{MaxBytes: 100, MaxFileBytes: 5}, `file "big" is 6 bytes: over the 5-byte limit`},
		{"duplicate", []ent{ok, file(top+"README", "again")}, source.Limits{}, `entry "README" appears twice`},
		{"empty", nil, source.Limits{}, "the archive is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			dst := filepath.Join(parent, "tree")
			if err := os.Mkdir(dst, 0o755); err != nil {
				t.Fatal(err)
			}
			_, err := source.Unpack(bytes.NewReader(tgz(t, tc.ents...)), dst, tc.lim)
			if !errors.Is(err, source.ErrRefused) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Unpack: %v, want a refusal containing %q", err, tc.want)
			}
			// Nothing outside the tree.
			entries, _ := os.ReadDir(parent)
			if len(entries) != 1 {
				t.Errorf("the parent of the work dir holds %d entries, want only the tree", len(entries))
			}
		})
	}
	if _, err := source.Unpack(strings.NewReader("not gzip at all"), t.TempDir(), source.Limits{}); err == nil || !strings.Contains(err.Error(), "not a gzip tarball") {
		t.Errorf("plain text: %v, want not a gzip tarball", err)
	}
}

// gitRepo makes a real git repository with files and returns its dir; each
// commit call records the tree and returns the commit id.
type gitRepo struct {
	t   testing.TB
	dir string
}

func newGitRepo(t testing.TB) *gitRepo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	r := &gitRepo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	r.git("config", "user.email", "dev@example.com")
	r.git("config", "user.name", "dev")
	return r
}

func (r *gitRepo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-C", r.dir}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func (r *gitRepo) write(name, body string, mode os.FileMode) {
	r.t.Helper()
	p := filepath.Join(r.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), mode); err != nil {
		r.t.Fatal(err)
	}
}

func (r *gitRepo) commit(msg string) string {
	r.t.Helper()
	r.git("add", "-A")
	r.git("commit", "-q", "-m", msg)
	return r.git("rev-parse", "HEAD")
}

// archive is `git archive` of sha as GitHub lays it out.
func (r *gitRepo) archive(sha string) []byte {
	r.t.Helper()
	out, err := exec.Command("git", "-C", r.dir, "archive", "--format=tar.gz", "--prefix=o-r-"+sha[:7]+"/", sha).Output()
	if err != nil {
		r.t.Fatal(err)
	}
	return out
}

// TestUnpackGitArchive: a real repository's archive unpacks with its
// files, modes and in-tree symlinks; the commit is read from the archive;
// the digest is the same for the same files and differs when one changes.
func TestUnpackGitArchive(t *testing.T) {
	r := newGitRepo(t)
	r.write("inference_engine/sim.yaml", "slowdown: 1.0\n", 0o644)
	r.write("bin/serve.sh", "#!/bin/sh\nexit 0\n", 0o755)
	r.write("docs/README.md", "docs\n", 0o644)
	if err := os.Symlink("../inference_engine/sim.yaml", filepath.Join(r.dir, "docs", "sim.yaml")); err != nil {
		t.Fatal(err)
	}
	c1 := r.commit("base")

	old := unmaskAll(t)
	defer old()
	dst := t.TempDir()
	tree, err := source.Unpack(bytes.NewReader(r.archive(c1)), dst, source.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if tree.Commit != c1 || tree.Files != 7 || !strings.HasPrefix(tree.Digest, "sha256:") {
		t.Errorf("tree = %+v, want commit %s and 7 entries (3 dirs, 3 files, 1 symlink)", tree, c1)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "docs", "sim.yaml")); err != nil || string(b) != "slowdown: 1.0\n" {
		t.Errorf("in-tree symlink: %q %v", b, err)
	}
	for name, want := range map[string]os.FileMode{"bin/serve.sh": 0o755, "inference_engine/sim.yaml": 0o644, "bin": 0o755 | os.ModeDir} {
		fi, err := os.Stat(filepath.Join(dst, name))
		if err != nil || fi.Mode() != want {
			t.Errorf("%s: mode %v (%v), want %v whatever the umask", name, fi.Mode(), err, want)
		}
	}
	again, err := source.Unpack(bytes.NewReader(r.archive(c1)), t.TempDir(), source.Limits{})
	if err != nil || again.Digest != tree.Digest {
		t.Errorf("second unpack digest %s (%v), want %s", again.Digest, err, tree.Digest)
	}
	r.write("inference_engine/sim.yaml", "slowdown: 1.5\n", 0o644)
	c2 := r.commit("slower")
	changed, err := source.Unpack(bytes.NewReader(r.archive(c2)), t.TempDir(), source.Limits{})
	if err != nil || changed.Digest == tree.Digest || changed.Commit != c2 {
		t.Errorf("changed tree = %+v (%v), want a new digest and commit %s", changed, err, c2)
	}
}
