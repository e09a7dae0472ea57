package web

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Sign in with GitHub. The app's own OAuth client (GitHub hands back its
// client_id and client_secret with the manifest conversion) signs a person
// in: GET /login sends the browser to GitHub's /login/oauth/authorize with
// a state bound to this browser by a cookie; GitHub sends it back to
// /oauth/callback with a code, which the server exchanges, with the
// client secret, for a user token. The token stays on the server: the
// browser holds only a random session id, and the store only its hash and
// the token sealed (sessions.go). Every private page and API
// answer then asks GitHub, with the person's token, whether they may read
// that repository (GET /repos/{owner}/{name} is 404 for those who may
// not), and remembers the answer for AccessTTL only, so access taken away
// on GitHub closes the pages within that time. Signing out forgets the
// session, on every replica, and revokes the token at GitHub.

// SignIn is the app's OAuth client.
type SignIn struct {
	ClientID, ClientSecret string
	// WebURL is GitHub's web address (https://github.com), APIURL its REST
	// API (https://api.github.com/).
	WebURL, APIURL string
	// HTTPClient calls GitHub; nil: one with a 10 s timeout.
	HTTPClient *http.Client
}

const (
	// SessionTTL is the longest a sign-in lasts; then the person signs in
	// again (GitHub remembers the consent, so it is one click).
	SessionTTL = 8 * time.Hour
	// rotateEvery is how often a session in use gets a new id; the old id
	// keeps working for rotateGrace, for requests already on their way.
	rotateEvery = 15 * time.Minute
	rotateGrace = 30 * time.Second
	// AccessTTL is how long GitHub's answer on one repository is trusted.
	AccessTTL = time.Minute
	// stateTTL is how long a sign-in may take on GitHub's side.
	stateTTL = 10 * time.Minute

	sessionCookie = "perfgate_session"
	stateCookie   = "perfgate_oauth_state"
)

// errSignedOut means GitHub no longer honours the session's token
// (revoked, or the app uninstalled): the session ends.
var errSignedOut = errors.New("the GitHub token was revoked or expired")

type sessionKey struct{}

// withSession finds the request's session in the store, rotates its id
// when due, and carries it in the request's context.
func (h *Handler) withSession(w http.ResponseWriter, r *http.Request) *http.Request {
	if h.signIn == nil || strings.HasPrefix(r.URL.Path, "/static/") {
		return r // the stylesheet and scripts are the same for everyone: no store read
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return r
	}
	now := h.now()
	s, err := h.sessions.get(r.Context(), c.Value, now)
	if err != nil {
		h.log.Warn().Err(err).Msg("sign-in: read the session: treated as signed out")
		return r
	}
	if s == nil {
		return r
	}
	if now.Sub(s.rotated) >= rotateEvery {
		id, err := h.sessions.rotate(r.Context(), s, now)
		if err != nil {
			h.log.Warn().Err(err).Str("user", s.login).Msg("sign-in: rotate the session id")
		}
		if id != "" {
			h.setSessionCookie(w, r, id, s.expires)
		}
	}
	return r.WithContext(context.WithValue(r.Context(), sessionKey{}, s))
}

func sessionOf(ctx context.Context) *session {
	s, _ := ctx.Value(sessionKey{}).(*session)
	return s
}

func (h *Handler) setSessionCookie(w http.ResponseWriter, r *http.Request, id string, expires time.Time) {
	// Max-Age, not Expires: the browser counts it on its own clock.
	h.setCookie(w, r, sessionCookie, id, "/", int(expires.Sub(h.now()).Seconds()))
}

// setCookie sets one of sign-in's cookies: HttpOnly, SameSite=Lax (sent
// when GitHub sends the browser back, a top-level GET), Secure whenever
// the request came over HTTPS; maxAge < 0 deletes it.
func (h *Handler) setCookie(w http.ResponseWriter, r *http.Request, name, value, path string, maxAge int) {
	//nolint:gosec // HttpOnly and SameSite set; Secure whenever the request came over HTTPS (h.overHTTPS), as the grant cookie
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: path, MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: h.overHTTPS(r)})
}

// userMayRead asks GitHub, as the signed-in person, whether they may read
// repo; the answer is kept for AccessTTL.
func (h *Handler) userMayRead(ctx context.Context, s *session, repo string) bool {
	now := h.now()
	if may, ok := h.sessions.cachedAccess(s.id, repo, now); ok {
		return may
	}
	may, err := h.askRepo(ctx, s.token, repo)
	if errors.Is(err, errSignedOut) {
		if err := h.sessions.drop(ctx, s.id); err != nil {
			h.log.Warn().Err(err).Str("user", s.login).Msg("sign-in: end the session of a revoked token")
		}
		return false
	}
	if err != nil {
		h.log.Warn().Err(err).Str("repo", repo).Str("user", s.login).Msg("repository access unknown: treated as none")
		return false
	}
	h.sessions.rememberAccess(s.id, repo, may, now.Add(AccessTTL))
	return may
}

// askRepo is GET /repos/{owner}/{name} with the person's token: 200 when
// they may read it, 404 (or 403) when not.
func (h *Handler) askRepo(ctx context.Context, token, repo string) (bool, error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || !repoPart(owner) || !repoPart(name) {
		return false, nil // no such repository on GitHub: nobody may read it
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.signIn.api("repos/"+owner+"/"+name), nil) //nolint:gosec // as below: a checked owner and name under GitHub's API
	if err != nil {
		return false, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/vnd.github+json")
	resp, err := h.signIn.client().Do(req) //nolint:gosec // GitHub's API from the configuration; the path holds only a checked owner and name
	if err != nil {
		return false, fmt.Errorf("ask GitHub about %s: %w", repo, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	switch resp.StatusCode {
	case http.StatusOK:
		return true, nil
	case http.StatusNotFound, http.StatusForbidden:
		return false, nil
	case http.StatusUnauthorized:
		return false, errSignedOut
	}
	return false, fmt.Errorf("ask GitHub about %s: %s", repo, resp.Status)
}

// login starts the sign-in: a fresh state, bound to this browser by a
// short-lived cookie, and the page to return to.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	state, err := randomToken(24)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	next := r.URL.Query().Get("next")
	if !localPath(next) {
		next = "/"
	}
	h.setCookie(w, r, stateCookie, state+"."+base64.RawURLEncoding.EncodeToString([]byte(next)), "/oauth/", int(stateTTL.Seconds()))
	q := url.Values{"client_id": {h.signIn.ClientID}, "redirect_uri": {h.callbackURL(r)}, "state": {state}}
	http.Redirect(w, r, strings.TrimSuffix(h.signIn.WebURL, "/")+"/login/oauth/authorize?"+q.Encode(), http.StatusFound)
}

// callbackURL is where GitHub sends the browser back: under the public
// URL, which is the callback URL the app's manifest registered.
func (h *Handler) callbackURL(r *http.Request) string {
	base := h.publicURL
	if base == "" {
		scheme := "http"
		if h.overHTTPS(r) {
			scheme = "https"
		}
		base = scheme + "://" + r.Host
	}
	return base + "/oauth/callback"
}

// callback finishes the sign-in: the state must be this browser's, the
// code is exchanged for the person's token, and a session begins under a
// new id.
func (h *Handler) callback(w http.ResponseWriter, r *http.Request) {
	c, err := r.Cookie(stateCookie)
	h.setCookie(w, r, stateCookie, "", "/oauth/", -1)
	var state, next string
	if err == nil {
		var enc string
		state, enc, _ = strings.Cut(c.Value, ".")
		if b, err := base64.RawURLEncoding.DecodeString(enc); err == nil && localPath(string(b)) {
			next = string(b)
		}
	}
	q := r.URL.Query()
	if state == "" || subtle.ConstantTimeCompare([]byte(state), []byte(q.Get("state"))) != 1 {
		h.fail(w, r, http.StatusBadRequest, "This sign-in did not start in this browser, or took longer than 10 minutes. Sign in again from perfgate's front page.")
		return
	}
	if e := q.Get("error"); e != "" {
		h.fail(w, r, http.StatusForbidden, "GitHub did not sign you in ("+e+"). Sign in again, and authorise the app when GitHub asks.")
		return
	}
	token, err := h.exchange(r.Context(), q.Get("code"), h.callbackURL(r))
	if err != nil {
		h.log.Warn().Err(err).Msg("sign-in: code exchange")
		h.fail(w, r, http.StatusBadGateway, "GitHub did not complete the sign-in: "+err.Error()+". Sign in again; if it keeps failing, check the server's OAuth client settings (PERFGATE_GITHUB_OAUTH_CLIENT_ID and _SECRET).")
		return
	}
	login, err := h.whoAmI(r.Context(), token)
	if err != nil {
		h.fail(w, r, http.StatusBadGateway, "GitHub did not say who signed in: "+err.Error()+". Sign in again.")
		return
	}
	now := h.now()
	// Any session the browser had is replaced, not extended.
	if prev := sessionOf(r.Context()); prev != nil {
		if err := h.sessions.drop(r.Context(), prev.id); err != nil {
			h.log.Warn().Err(err).Str("user", prev.login).Msg("sign-in: end the browser's previous session")
		}
	}
	id, expires, err := h.sessions.create(r.Context(), login, token, now)
	if err != nil {
		h.internal(w, r, fmt.Errorf("start a session: %w", err))
		return
	}
	h.setSessionCookie(w, r, id, expires)
	h.log.Info().Str("user", login).Msg("signed in")
	if next == "" {
		next = "/"
	}
	http.Redirect(w, r, next, http.StatusFound) //nolint:gosec // next is a local path (localPath), never another site
}

// logout ends the session here and its token at GitHub.
func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	if s := sessionOf(r.Context()); s != nil {
		if err := h.sessions.drop(r.Context(), s.id); err != nil {
			h.log.Error().Err(err).Str("user", s.login).Msg("sign-out: end the session")
			h.internal(w, r, fmt.Errorf("end the session: %w", err))
			return
		}
		if err := h.revoke(r.Context(), s.token); err != nil {
			h.log.Warn().Err(err).Str("user", s.login).Msg("sign-out: revoke the GitHub token")
		}
	}
	h.setCookie(w, r, sessionCookie, "", "/", -1)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (h *Handler) exchange(ctx context.Context, code, redirect string) (string, error) {
	if code == "" {
		return "", errors.New("no code in GitHub's answer")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	form := url.Values{"client_id": {h.signIn.ClientID}, "client_secret": {h.signIn.ClientSecret}, "code": {code}, "redirect_uri": {redirect}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(h.signIn.WebURL, "/")+"/login/oauth/access_token", strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := h.signIn.client().Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		AccessToken string `json:"access_token"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out); err != nil {
		return "", fmt.Errorf("%s: %w", resp.Status, err)
	}
	if out.Error != "" {
		return "", fmt.Errorf("%s: %s", out.Error, out.Description)
	}
	if out.AccessToken == "" {
		return "", fmt.Errorf("%s without a token", resp.Status)
	}
	return out.AccessToken, nil
}

func (h *Handler) whoAmI(ctx context.Context, token string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.signIn.api("user"), nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/vnd.github+json")
	resp, err := h.signIn.client().Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var u struct {
		Login string `json:"login"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&u); err != nil || resp.StatusCode != http.StatusOK || u.Login == "" {
		return "", fmt.Errorf("GET /user: %s", resp.Status)
	}
	return u.Login, nil
}

// revoke is DELETE /applications/{client_id}/token, as the OAuth client.
func (h *Handler) revoke(ctx context.Context, token string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	body, _ := json.Marshal(map[string]string{"access_token": token})
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, h.signIn.api("applications/"+url.PathEscape(h.signIn.ClientID)+"/token"), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.SetBasicAuth(h.signIn.ClientID, h.signIn.ClientSecret)
	req.Header.Set("Accept", "application/vnd.github+json")
	resp, err := h.signIn.client().Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusNotFound {
		return fmt.Errorf("DELETE token: %s", resp.Status)
	}
	return nil
}

func (s *SignIn) api(path string) string {
	base := s.APIURL
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	return base + path
}

func (s *SignIn) client() *http.Client {
	if s.HTTPClient != nil {
		return s.HTTPClient
	}
	return defaultClient
}

var defaultClient = &http.Client{Timeout: 10 * time.Second}

// repoPart: an owner or repository name as GitHub allows them (letters,
// digits, '-', '_', '.'), so the path asked of GitHub is that repository's.
func repoPart(s string) bool {
	if s == "" || s == "." || s == ".." || len(s) > 100 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// localPath: a path on this server, not "//elsewhere" (an open redirect).
func localPath(p string) bool {
	return strings.HasPrefix(p, "/") && !strings.HasPrefix(p, "//") && !strings.HasPrefix(p, "/\\")
}

func randomToken(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// Account is who the pages say is signed in.
type Account struct {
	Enabled bool   // sign-in is configured
	Login   string // empty: nobody
}
