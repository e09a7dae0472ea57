package source

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// Tree describes an unpacked tree.
type Tree struct {
	// Commit is the commit id the archive says it holds (git archive and
	// GitHub write it as the pax global header's comment); "" if absent.
	Commit string `json:"commit,omitempty"`
	// Digest is "sha256:<hex>" over every entry's path, type, mode and
	// content (or link target), in path order: the same files give the
	// same digest whatever the archive's order.
	Digest string `json:"digest"`
	Files  int    `json:"files"`
	Bytes  int64  `json:"bytes"`
}

// Unpack reads a gzip tar with one top directory (GitHub's tarball, or
// git archive --prefix) and writes what lies under that directory into
// dst, which must exist and be empty. It refuses, with an error wrapping
// ErrRefused, any entry that is absolute, climbs out with "..", lies
// under a symlink, links (symbolic or hard) out of the tree, or is a
// device or fifo, and any archive over lim. Files are written 0644 (0755
// when executable) whatever the archive says, and through an os.Root, so
// no write can leave dst. On error dst holds a partial tree: remove it.
func Unpack(r io.Reader, dst string, lim Limits) (Tree, error) {
	lim = lim.withDefaults()
	zr, err := gzip.NewReader(r)
	if err != nil {
		return Tree{}, fmt.Errorf("read source archive: not a gzip tarball: %w", err)
	}
	defer zr.Close()
	root, err := os.OpenRoot(dst)
	if err != nil {
		return Tree{}, fmt.Errorf("open work directory: %w", err)
	}
	defer root.Close()
	u := &unpacker{root: root, lim: lim, links: map[string]bool{}, sum: sha256.New()}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Tree{}, fmt.Errorf("read source archive: %w", err)
		}
		if err := u.entry(hdr, tr); err != nil {
			return Tree{}, err
		}
	}
	if u.top == "" {
		return Tree{}, refused("the archive is empty")
	}
	if err := u.checkLinks(); err != nil {
		return Tree{}, err
	}
	return Tree{Commit: u.commit, Digest: u.digest(), Files: u.files, Bytes: u.bytes}, nil
}

type unpacker struct {
	root    *os.Root
	lim     Limits
	top     string
	commit  string
	files   int
	bytes   int64
	links   map[string]bool // symlinks written, by relative path
	records []string        // one per entry, for the digest
	sum     hash.Hash
}

func refused(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
}

func (u *unpacker) entry(hdr *tar.Header, body io.Reader) error {
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		u.commit = hdr.PAXRecords["comment"]
		return nil
	}
	rel, err := u.relative(hdr.Name)
	if err != nil || rel == "" {
		return err
	}
	u.files++
	if u.files > u.lim.MaxFiles {
		return refused("more than %d entries: the tree is too large for this runner (raise the limit or slim the repository)", u.lim.MaxFiles)
	}
	if err := u.underLink(rel); err != nil {
		return err
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := u.root.MkdirAll(rel, 0o755); err != nil {
			return fmt.Errorf("unpack %s: %w", rel, err)
		}
		return u.root.Chmod(rel, 0o755)
	case tar.TypeReg:
		return u.file(rel, hdr, body)
	case tar.TypeSymlink:
		return u.symlink(rel, hdr.Linkname)
	case tar.TypeLink:
		return u.hardlink(rel, hdr.Linkname)
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		return refused("entry %q is a device or fifo: a source tree holds none", hdr.Name)
	default:
		return refused("entry %q has tar type %q, which a source tree does not hold", hdr.Name, hdr.Typeflag)
	}
}

// relative strips the archive's one top directory and refuses a name that
// would land outside the tree. "" is the top directory itself.
func (u *unpacker) relative(name string) (string, error) {
	if strings.HasPrefix(name, "/") || filepath.IsAbs(name) {
		return "", refused("entry %q has an absolute path", name)
	}
	top, rest, _ := strings.Cut(strings.TrimPrefix(name, "./"), "/")
	switch {
	case top == "" || top == "." || top == "..":
		return "", refused("entry %q is outside the archive's top directory", name)
	case u.top == "":
		u.top = top
	case top != u.top:
		return "", refused("entries under both %q and %q: a GitHub tarball has one top directory", u.top, top)
	}
	rest = strings.TrimSuffix(rest, "/")
	if rest == "" {
		return "", nil
	}
	if !filepath.IsLocal(rest) || strings.Contains(rest, "\\") {
		return "", refused("entry %q climbs out of the tree", name)
	}
	return filepath.Clean(rest), nil
}

// underLink refuses an entry whose parent is a symlink: written through
// it, the entry could land anywhere the link points.
func (u *unpacker) underLink(rel string) error {
	for d := filepath.Dir(rel); d != "."; d = filepath.Dir(d) {
		if u.links[d] {
			return refused("entry %q lies under the symlink %q", rel, d)
		}
	}
	return nil
}

func (u *unpacker) file(rel string, hdr *tar.Header, body io.Reader) error {
	if hdr.Size > u.lim.MaxFileBytes {
		return refused("file %q is %d bytes: over the %d-byte limit of one file", rel, hdr.Size, u.lim.MaxFileBytes)
	}
	if u.bytes+hdr.Size > u.lim.MaxBytes {
		return refused("the tree is over %d bytes (at %q): too large for this runner", u.lim.MaxBytes, rel)
	}
	if err := u.parent(rel); err != nil {
		return err
	}
	mode := fs.FileMode(0o644)
	if hdr.Mode&0o111 != 0 {
		mode = 0o755
	}
	f, err := u.root.OpenFile(rel, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if errors.Is(err, fs.ErrExist) {
		return refused("entry %q appears twice", rel)
	}
	if err != nil {
		return fmt.Errorf("unpack %s: %w", rel, err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("unpack %s: %w", rel, err)
	}
	u.bytes += n
	// Explicitly: the agent's umask must not make the tree unreadable to
	// the engine's unprivileged user.
	if err := u.root.Chmod(rel, mode); err != nil {
		return fmt.Errorf("unpack %s: %w", rel, err)
	}
	u.records = append(u.records, fmt.Sprintf("f %o %s\x00%x", mode, rel, h.Sum(nil)))
	return nil
}

func (u *unpacker) symlink(rel, target string) error {
	if target == "" || path.IsAbs(target) || filepath.IsAbs(target) {
		return refused("symlink %q points to the absolute path %q", rel, target)
	}
	if !filepath.IsLocal(filepath.Join(filepath.Dir(rel), target)) {
		return refused("symlink %q -> %q points outside the tree", rel, target)
	}
	if err := u.parent(rel); err != nil {
		return err
	}
	if err := u.root.Symlink(target, rel); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return refused("entry %q appears twice", rel)
		}
		return fmt.Errorf("unpack symlink %s: %w", rel, err)
	}
	u.links[rel] = true
	u.records = append(u.records, fmt.Sprintf("l %s\x00%s", rel, target))
	return nil
}

func (u *unpacker) hardlink(rel, linkname string) error {
	target, err := u.relative(linkname)
	if err != nil {
		return err
	}
	if target == "" {
		return refused("hard link %q points at the top directory", rel)
	}
	if err := u.underLink(target); err != nil {
		return err
	}
	fi, err := u.root.Lstat(target)
	if err != nil || !fi.Mode().IsRegular() {
		return refused("hard link %q -> %q: the target is not a file of the tree written before it", rel, linkname)
	}
	if err := u.parent(rel); err != nil {
		return err
	}
	if err := u.root.Link(target, rel); err != nil {
		return fmt.Errorf("unpack hard link %s: %w", rel, err)
	}
	u.records = append(u.records, fmt.Sprintf("h %s\x00%s", rel, target))
	return nil
}

func (u *unpacker) parent(rel string) error {
	if d := filepath.Dir(rel); d != "." {
		if err := u.root.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("unpack %s: %w", rel, err)
		}
	}
	return nil
}

// checkLinks resolves every symlink through the os.Root, which follows
// links the way the kernel does and refuses a resolution that leaves the
// root: a chain of links that each look local (a -> ., b -> a/..) cannot
// escape unnoticed. A dangling link is allowed; a loop only fails where
// it is used.
func (u *unpacker) checkLinks() error {
	names := make([]string, 0, len(u.links))
	for l := range u.links {
		names = append(names, l)
	}
	sort.Strings(names)
	for _, l := range names {
		_, err := u.root.Stat(l)
		if err == nil || errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ELOOP) {
			continue
		}
		target, _ := u.root.Readlink(l)
		return refused("symlink %q -> %q resolves outside the tree: %v", l, target, err)
	}
	return nil
}

func (u *unpacker) digest() string {
	sort.Strings(u.records)
	for _, r := range u.records {
		u.sum.Write([]byte(r))
		u.sum.Write([]byte{'\n'})
	}
	return "sha256:" + hex.EncodeToString(u.sum.Sum(nil))
}
