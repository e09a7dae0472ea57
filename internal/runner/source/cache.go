package source

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// DefaultCacheBytes bounds a cache whose size is not configured.
const DefaultCacheBytes = 20 << 30

// attempts is how often Get tries a download that broke off mid-stream.
const attempts = 3

var commitID = regexp.MustCompile(`^[0-9a-f]{4,64}$`)

// Cache keeps unpacked trees on disk, one directory per commit:
//
//	DIR/<sha>/tree/       the checkout
//	DIR/<sha>/meta.json   what Unpack reported; its mtime is the last use
//	DIR/<sha>/…           files a caller keeps with the commit (Home)
//
// When the trees' total size passes the bound, the least recently used
// ones not in use are removed. One agent owns a cache directory.
type Cache struct {
	dir    string
	max    int64
	limits Limits
	log    zerolog.Logger
	// OnEvict, when set, is called before a commit's directory is removed
	// (the agent removes the image a build recorded there).
	OnEvict func(sha, home string)
	now     func() time.Time

	fetchMu sync.Mutex // one download and eviction at a time
	mu      sync.Mutex
	inUse   map[string]int
}

// Checkout is a tree in the cache, held until Release.
type Checkout struct {
	SHA string
	// Dir is the tree's root.
	Dir string
	// Home is the commit's directory: Dir's parent, for files kept with
	// the commit and evicted with it (a build's log and result).
	Home   string
	Tree   Tree
	Reused bool // found in the cache, not downloaded
	c      *Cache
	once   sync.Once
}

type meta struct {
	SHA       string    `json:"sha"`
	Tree      Tree      `json:"tree"`
	FetchedAt time.Time `json:"fetched_at"`
}

// NewCache opens (creating) a cache in dir bounded to maxBytes of trees
// (DefaultCacheBytes when 0), and removes what an interrupted download
// left behind.
func NewCache(dir string, maxBytes int64, lim Limits, log zerolog.Logger) (*Cache, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultCacheBytes
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("source cache %s: %w", dir, err)
	}
	c := &Cache{dir: dir, max: maxBytes, limits: lim, log: log, now: time.Now, inUse: map[string]int{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("source cache %s: %w", dir, err)
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if _, err := os.Stat(filepath.Join(p, "meta.json")); strings.HasPrefix(e.Name(), ".tmp-") || (e.IsDir() && err != nil) {
			if err := os.RemoveAll(p); err != nil {
				return nil, fmt.Errorf("source cache: remove partial %s: %w", p, err)
			}
		}
	}
	return c, nil
}

// Dir is the cache's directory.
func (c *Cache) Dir() string { return c.dir }

// Get returns the tree of sha, from the cache or by unpacking what fetch
// returns (a gzip tarball, which Get closes). A download that breaks off
// is tried again, up to 3 times; a refused archive (ErrRefused) or a
// fetch error is returned at once. The checkout is kept from eviction
// until Release.
func (c *Cache) Get(ctx context.Context, sha string, fetch func(ctx context.Context) (io.ReadCloser, error)) (*Checkout, error) {
	if !commitID.MatchString(sha) {
		return nil, fmt.Errorf("source cache: %q is not a commit id", sha)
	}
	c.fetchMu.Lock()
	defer c.fetchMu.Unlock()
	home := filepath.Join(c.dir, sha)
	if m, err := readMeta(home); err == nil {
		now := c.now()
		_ = os.Chtimes(filepath.Join(home, "meta.json"), now, now)
		return c.hold(sha, home, m.Tree, true), nil
	}
	var tree Tree
	var err error
	for try := 1; ; try++ {
		tree, err = c.download(ctx, sha, home, fetch)
		if err == nil || errors.Is(err, ErrRefused) || errors.Is(err, errFetch) || ctx.Err() != nil || try == attempts {
			break
		}
		c.log.Warn().Err(err).Str("sha", sha).Int("attempt", try).Msg("source download broke off: retrying")
	}
	if err != nil {
		return nil, err
	}
	co := c.hold(sha, home, tree, false)
	c.evict(sha)
	return co, nil
}

var errFetch = errors.New("fetch")

func (c *Cache) download(ctx context.Context, sha, home string, fetch func(ctx context.Context) (io.ReadCloser, error)) (Tree, error) {
	tmp, err := os.MkdirTemp(c.dir, ".tmp-"+sha+"-")
	if err != nil {
		return Tree{}, fmt.Errorf("source cache: %w", err)
	}
	done := false
	defer func() {
		if !done {
			_ = os.RemoveAll(tmp)
		}
	}()
	treeDir := filepath.Join(tmp, "tree")
	if err := os.Mkdir(treeDir, 0o755); err != nil {
		return Tree{}, fmt.Errorf("source cache: %w", err)
	}
	// The engine's unprivileged user reads the tree: 0755 whatever the umask.
	if err := os.Chmod(treeDir, 0o755); err != nil {
		return Tree{}, fmt.Errorf("source cache: %w", err)
	}
	body, err := fetch(ctx)
	if err != nil {
		return Tree{}, fmt.Errorf("%w: %w", errFetch, err)
	}
	start := c.now()
	tree, err := Unpack(body, treeDir, c.limits)
	if cerr := body.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("read source archive: %w", cerr)
	}
	if err != nil {
		return Tree{}, fmt.Errorf("unpack %s: %w", sha, err)
	}
	if tree.Commit != "" && !strings.HasPrefix(tree.Commit, sha) && !strings.HasPrefix(sha, tree.Commit) {
		return Tree{}, fmt.Errorf("unpack %s: %w: the archive holds commit %s", sha, ErrRefused, tree.Commit)
	}
	b, err := json.Marshal(meta{SHA: sha, Tree: tree, FetchedAt: c.now().UTC()})
	if err != nil {
		return Tree{}, fmt.Errorf("source cache: %w", err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "meta.json"), b, 0o600); err != nil {
		return Tree{}, fmt.Errorf("source cache: %w", err)
	}
	if err := os.RemoveAll(home); err != nil {
		return Tree{}, fmt.Errorf("source cache: %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return Tree{}, fmt.Errorf("source cache: %w", err)
	}
	if err := os.Rename(tmp, home); err != nil {
		return Tree{}, fmt.Errorf("source cache: %w", err)
	}
	done = true
	c.log.Info().Str("sha", sha).Int("files", tree.Files).Int64("bytes", tree.Bytes).Str("tree", tree.Digest).
		Dur("took", c.now().Sub(start).Round(time.Millisecond)).Msg("source unpacked")
	return tree, nil
}

func (c *Cache) hold(sha, home string, tree Tree, reused bool) *Checkout {
	c.mu.Lock()
	c.inUse[sha]++
	c.mu.Unlock()
	return &Checkout{SHA: sha, Dir: filepath.Join(home, "tree"), Home: home, Tree: tree, Reused: reused, c: c}
}

// Release lets the tree be evicted again. Safe to call twice.
func (co *Checkout) Release() {
	co.once.Do(func() {
		co.c.mu.Lock()
		defer co.c.mu.Unlock()
		if co.c.inUse[co.SHA]--; co.c.inUse[co.SHA] <= 0 {
			delete(co.c.inUse, co.SHA)
		}
	})
}

// evict removes least recently used trees, never one in use or keep,
// until the cache is within its bound.
func (c *Cache) evict(keep string) {
	type entry struct {
		sha, home string
		bytes     int64
		used      time.Time
	}
	dirs, err := os.ReadDir(c.dir)
	if err != nil {
		c.log.Warn().Err(err).Msg("source cache: list for eviction")
		return
	}
	var es []entry
	var total int64
	for _, d := range dirs {
		home := filepath.Join(c.dir, d.Name())
		fi, err := os.Stat(filepath.Join(home, "meta.json"))
		if err != nil {
			continue
		}
		m, err := readMeta(home)
		if err != nil {
			continue
		}
		es = append(es, entry{sha: m.SHA, home: home, bytes: m.Tree.Bytes, used: fi.ModTime()})
		total += m.Tree.Bytes
	}
	sort.Slice(es, func(i, j int) bool { return es[i].used.Before(es[j].used) })
	for _, e := range es {
		if total <= c.max {
			return
		}
		c.mu.Lock()
		busy := c.inUse[e.sha] > 0
		c.mu.Unlock()
		if busy || e.sha == keep {
			continue
		}
		if c.OnEvict != nil {
			c.OnEvict(e.sha, e.home)
		}
		if err := os.RemoveAll(e.home); err != nil {
			c.log.Warn().Err(err).Str("sha", e.sha).Msg("source cache: evict")
			continue
		}
		total -= e.bytes
		c.log.Info().Str("sha", e.sha).Int64("bytes", e.bytes).Msg("source cache: evicted the least recently used tree")
	}
	if total > c.max {
		c.log.Warn().Int64("bytes", total).Int64("limit", c.max).Msg("source cache over its limit: every tree left is in use")
	}
}

func readMeta(home string) (meta, error) {
	b, err := os.ReadFile(filepath.Join(home, "meta.json"))
	if err != nil {
		return meta{}, err
	}
	var m meta
	if err := json.Unmarshal(b, &m); err != nil {
		return meta{}, fmt.Errorf("source cache %s: %w", home, err)
	}
	if m.SHA == "" {
		return meta{}, fs.ErrNotExist
	}
	return m, nil
}
