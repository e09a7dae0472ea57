package web

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Visibility says whether a repository is public. The server answers from
// GitHub (the repository's "private" flag, through the app's installation);
// an error counts as private, so a GitHub outage hides pages rather than
// exposing them.
type Visibility interface {
	Public(ctx context.Context, repo string) (bool, error)
}

// StaticVisibility is a fixed answer per repository (the demo and tests);
// repositories not listed are private.
type StaticVisibility map[string]bool

// Public implements Visibility.
func (v StaticVisibility) Public(_ context.Context, repo string) (bool, error) { return v[repo], nil }

// cachedVisibility remembers answers for a while: the dashboard asks on
// every request, GitHub allows 5,000 calls an hour.
type cachedVisibility struct {
	next Visibility
	ttl  time.Duration
	now  func() time.Time
	mu   sync.Mutex
	m    map[string]visEntry
}

type visEntry struct {
	public bool
	until  time.Time
}

func (c *cachedVisibility) Public(ctx context.Context, repo string) (bool, error) {
	c.mu.Lock()
	e, ok := c.m[repo]
	c.mu.Unlock()
	if ok && c.now().Before(e.until) {
		return e.public, nil
	}
	pub, err := c.next.Public(ctx, repo)
	if err != nil {
		return false, err
	}
	c.mu.Lock()
	c.m[repo] = visEntry{public: pub, until: c.now().Add(c.ttl)}
	c.mu.Unlock()
	return pub, nil
}

// Signer makes and checks links to one repository's pages that expire.
// A private repository's pages open only through such a link (the check
// run's "Details" link, the change-point issue's link, `perfgate` printing
// one); the first visit sets a cookie scoped to that repository with the
// same expiry, so the pages and the API it links to work from then on.
type Signer struct {
	key []byte
	ttl time.Duration
	now func() time.Time
}

// NewSigner signs with key; links live for ttl.
func NewSigner(key []byte, ttl time.Duration, now func() time.Time) *Signer {
	if now == nil {
		now = time.Now
	}
	return &Signer{key: key, ttl: ttl, now: now}
}

// CookieTTL is the longest a grant cookie lives; opening a posted link
// again renews it.
const CookieTTL = 12 * time.Hour

// AccessParam is the query parameter that carries a signed grant.
const AccessParam = "access"

// Token grants access to repo until the signer's TTL from now.
func (s *Signer) Token(repo string) string {
	exp := s.now().Add(s.ttl).Unix()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(exp))
	return base64.RawURLEncoding.EncodeToString(append(b[:], s.mac(repo, exp)...))
}

// Sign appends a grant for repo to the link u (a path or a URL).
func (s *Signer) Sign(repo, u string) string {
	sep := "?"
	if pu, err := url.Parse(u); err == nil && pu.RawQuery != "" {
		sep = "&"
	}
	return u + sep + AccessParam + "=" + s.Token(repo)
}

// errBadGrant is any grant that does not open repo now.
var errBadGrant = errors.New("access grant invalid or expired")

// Check returns the grant's expiry when token opens repo now.
func (s *Signer) Check(repo, token string) (time.Time, error) {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(raw) != 8+sha256.Size {
		return time.Time{}, errBadGrant
	}
	exp := int64(binary.BigEndian.Uint64(raw[:8]))
	if !hmac.Equal(raw[8:], s.mac(repo, exp)) {
		return time.Time{}, errBadGrant
	}
	t := time.Unix(exp, 0)
	if !s.now().Before(t) {
		return time.Time{}, errBadGrant
	}
	return t, nil
}

func (s *Signer) mac(repo string, exp int64) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("perfgate-dashboard\x00" + repo + "\x00"))
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(exp))
	m.Write(b[:])
	return m.Sum(nil)
}

// cookieName is the grant cookie of one repository.
func cookieName(repo string) string {
	sum := sha256.Sum256([]byte(repo))
	return "perfgate_access_" + hex.EncodeToString(sum[:6])
}

// allowed reports whether the request may read repo: a public repository,
// a signed-in person GitHub lets read it, a valid grant in the query
// (which then becomes a cookie), or a valid grant cookie.
func (h *Handler) allowed(w http.ResponseWriter, r *http.Request, repo string) bool {
	if pub, err := h.vis.Public(r.Context(), repo); err == nil && pub {
		return true
	} else if err != nil {
		h.log.Warn().Err(err).Str("repo", repo).Msg("repository visibility unknown: treated as private")
	}
	if s := sessionOf(r.Context()); s != nil && h.userMayRead(r.Context(), s, repo) {
		return true
	}
	if tok := r.URL.Query().Get(AccessParam); tok != "" {
		if exp, err := h.signer.Check(repo, tok); err == nil {
			// The browser keeps the grant for a working day at most, however
			// long the link lives: a shared machine does not keep a private
			// repository open for the link's 90 days.
			if limit := h.now().Add(CookieTTL); exp.After(limit) {
				exp = limit
			}
			//nolint:gosec // HttpOnly and SameSite set; Secure whenever the request came over HTTPS (h.overHTTPS)
			http.SetCookie(w, &http.Cookie{Name: cookieName(repo), Value: tok, Path: "/", Expires: exp,
				HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: h.overHTTPS(r)})
			return true
		}
	}
	if c, err := r.Cookie(cookieName(repo)); err == nil {
		if _, err := h.signer.Check(repo, c.Value); err == nil {
			return true
		}
	}
	return false
}

// overHTTPS reports whether the visitor reached the dashboard over HTTPS:
// directly, or through a TLS-terminating proxy that says so
// (X-Forwarded-Proto, or Forwarded's proto=).
// The grant cookie is Secure then, so a plain-HTTP request never carries
// it. Believing a client that claims https costs nothing: Secure only
// withholds the cookie from plain HTTP.
func (h *Handler) overHTTPS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if p, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ","); strings.EqualFold(strings.TrimSpace(p), "https") {
		return true
	}
	first, _, _ := strings.Cut(r.Header.Get("Forwarded"), ",")
	for _, part := range strings.Split(first, ";") {
		if k, v, ok := strings.Cut(strings.TrimSpace(part), "="); ok && strings.EqualFold(k, "proto") && strings.EqualFold(strings.Trim(v, `"`), "https") {
			return true
		}
	}
	return false
}

// noReferrer keeps the signed grant in a page's URL from leaking to the
// sites its links open (GitHub, Perfetto) in the Referer header.
func noReferrer(w http.ResponseWriter) { w.Header().Set("Referrer-Policy", "no-referrer") }
