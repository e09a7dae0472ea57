package githubtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Sign in with GitHub (docs.github.com, "Generating a user access token
// for a GitHub App"): the browser opens GET /login/oauth/authorize with
// the app's client_id, a redirect_uri under its callback URL and a state;
// GitHub sends it back to redirect_uri with a code and the same state; the
// app's server exchanges the code, once and within ten minutes, at
// POST /login/oauth/access_token with its client_id and client_secret for
// a user token (ghu_…), with which it calls the API as that person. The
// fake skips GitHub's sign-in and consent pages: the browser is signed in
// as SignInAs says (SignedInUser unless told), and has already authorised
// the app.

// The default test app's OAuth client.
const (
	ClientID     = "Iv1.perfgatetest0001"
	ClientSecret = "perfgate-test-oauth-client-secret"
)

// userCodeTTL is how long GitHub honours an OAuth code.
const userCodeTTL = 10 * time.Minute

type oauthClient struct {
	secret    string
	callbacks []string // empty: any redirect_uri (the default app in tests)
}

type oauthCode struct {
	client, redirect, login string
	expires                 time.Time
}

// oauthState lives apart from the Server struct's other maps, with its own
// lock: the user calls do not touch the installation state.
type oauthState struct {
	mu      sync.Mutex
	clients map[string]oauthClient
	codes   map[string]oauthCode
	tokens  map[string]string          // user token → login
	grants  map[string]map[string]bool // login → private repositories it may read
	browser string
}

func (s *Server) oauth() *oauthState {
	s.oauthOnce.Do(func() {
		s.users = &oauthState{
			clients: map[string]oauthClient{ClientID: {secret: ClientSecret}},
			codes:   map[string]oauthCode{}, tokens: map[string]string{}, grants: map[string]map[string]bool{},
			browser: SignedInUser,
		}
	})
	return s.users
}

// SignInAs makes login the person the fake's browser session belongs to:
// the next authorisation is theirs.
func (s *Server) SignInAs(login string) {
	o := s.oauth()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.browser = login
}

// Grant gives login read access to the private repository repo, or takes
// it away (a person leaving a team).
func (s *Server) Grant(login, repo string, access bool) {
	o := s.oauth()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.grants[login] == nil {
		o.grants[login] = map[string]bool{}
	}
	o.grants[login][repo] = access
}

// UserTokens returns how many user tokens are live (issued and not revoked).
func (s *Server) UserTokens() int {
	o := s.oauth()
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.tokens)
}

// addOAuthClient registers a manifest app's OAuth client.
func (s *Server) addOAuthClient(id, secret string, callbacks []string) {
	o := s.oauth()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.clients[id] = oauthClient{secret: secret, callbacks: callbacks}
}

func (s *Server) oauthRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /login/oauth/authorize", s.authorize)
	mux.HandleFunc("POST /login/oauth/access_token", s.accessToken)
	mux.HandleFunc("GET /user", s.getUser)
	mux.HandleFunc("DELETE /applications/{client}/token", s.revokeUserToken)
}

// authorize is the browser's visit: GitHub checks the client and the
// redirect_uri; perfgate must send a state, so the fake insists on one.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	o := s.oauth()
	o.mu.Lock()
	defer o.mu.Unlock()
	c, ok := o.clients[q.Get("client_id")]
	if !ok {
		http.Error(w, "The client_id "+q.Get("client_id")+" is not an OAuth app's or a GitHub App's.", http.StatusNotFound)
		return
	}
	redirect := q.Get("redirect_uri")
	if redirect == "" && len(c.callbacks) > 0 {
		redirect = c.callbacks[0]
	}
	if !redirectAllowed(redirect, c.callbacks) {
		http.Error(w, "The redirect_uri "+redirect+" is not associated with this application.", http.StatusBadRequest)
		return
	}
	if q.Get("state") == "" {
		http.Error(w, "githubtest: authorize without a state: the app cannot tell a forged callback from its own", http.StatusBadRequest)
		return
	}
	code := "oauth." + randomHex(10)
	o.codes[code] = oauthCode{client: q.Get("client_id"), redirect: q.Get("redirect_uri"), login: o.browser, expires: time.Now().Add(userCodeTTL)}
	target, _ := url.Parse(redirect)
	tq := target.Query()
	tq.Set("code", code)
	tq.Set("state", q.Get("state"))
	target.RawQuery = tq.Encode()
	http.Redirect(w, r, target.String(), http.StatusFound)
}

// redirectAllowed: GitHub wants the redirect_uri's host and port to be the
// callback URL's and its path under the callback's.
func redirectAllowed(redirect string, callbacks []string) bool {
	u, err := url.Parse(redirect)
	if err != nil || u.Host == "" {
		return false
	}
	if len(callbacks) == 0 {
		return true
	}
	for _, cb := range callbacks {
		c, err := url.Parse(cb)
		if err == nil && c.Host == u.Host && strings.HasPrefix(u.Path, c.Path) {
			return true
		}
	}
	return false
}

// accessToken exchanges a code. GitHub answers its errors with 200 and an
// "error" field, in JSON when asked for JSON, else form-encoded.
func (s *Server) accessToken(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	answer := func(v url.Values) {
		if strings.Contains(r.Header.Get("Accept"), "application/json") {
			m := map[string]string{}
			for k := range v {
				m[k] = v.Get(k)
			}
			writeJSON(w, http.StatusOK, m)
			return
		}
		w.Header().Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
		_, _ = w.Write([]byte(v.Encode()))
	}
	fail := func(code, desc string) { answer(url.Values{"error": {code}, "error_description": {desc}}) }
	f := r.Form
	o := s.oauth()
	o.mu.Lock()
	defer o.mu.Unlock()
	c, ok := o.clients[f.Get("client_id")]
	if !ok || f.Get("client_secret") != c.secret {
		fail("incorrect_client_credentials", "The client_id and/or client_secret passed are incorrect.")
		return
	}
	code, ok := o.codes[f.Get("code")]
	delete(o.codes, f.Get("code")) // good once, right or wrong
	if !ok || code.client != f.Get("client_id") || time.Now().After(code.expires) {
		fail("bad_verification_code", "The code passed is incorrect or expired.")
		return
	}
	if ru := f.Get("redirect_uri"); ru != "" && code.redirect != "" && ru != code.redirect {
		fail("redirect_uri_mismatch", "The redirect_uri MUST match the registered callback URL for this application.")
		return
	}
	tok := "ghu_" + randomHex(18)
	o.tokens[tok] = code.login
	answer(url.Values{"access_token": {tok}, "token_type": {"bearer"}, "scope": {""}})
}

// userOf returns the login a user token belongs to.
func (s *Server) userOf(r *http.Request) (string, bool) {
	a := r.Header.Get("Authorization")
	tok := strings.TrimPrefix(strings.TrimPrefix(a, "token "), "Bearer ")
	if !strings.HasPrefix(tok, "ghu_") {
		return "", false
	}
	o := s.oauth()
	o.mu.Lock()
	defer o.mu.Unlock()
	login, ok := o.tokens[tok]
	return login, ok
}

func (s *Server) getUser(w http.ResponseWriter, r *http.Request) {
	login, ok := s.userOf(r)
	if !ok {
		writeError(w, http.StatusUnauthorized, "Requires authentication")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"login": login, "id": len(login), "type": "User"})
}

// getRepoAs answers GET /repos/{o}/{r} for a user token: a public
// repository, or a private one the person was granted; anything else is
// 404, as GitHub hides a private repository from those who cannot read it.
func (s *Server) getRepoAs(login string, w http.ResponseWriter, r *http.Request) {
	repo := repoOf(r)
	s.mu.Lock()
	st := s.repos[repo]
	private := st != nil && st.private
	s.mu.Unlock()
	o := s.oauth()
	o.mu.Lock()
	granted := o.grants[login][repo]
	o.mu.Unlock()
	if private && !granted {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	s.getRepo(w, r)
}

// repoAny serves GET /repos/{o}/{r} to a user token or, as before, an
// installation token.
func (s *Server) repoAny(w http.ResponseWriter, r *http.Request) {
	if login, ok := s.userOf(r); ok {
		s.getRepoAs(login, w, r)
		return
	}
	if strings.Contains(r.Header.Get("Authorization"), "ghu_") {
		writeError(w, http.StatusUnauthorized, "Bad credentials")
		return
	}
	s.auth(s.getRepo)(w, r)
}

// revokeUserToken is DELETE /applications/{client_id}/token: the app,
// authenticated as its OAuth client, revokes a user token.
func (s *Server) revokeUserToken(w http.ResponseWriter, r *http.Request) {
	id, secret, ok := r.BasicAuth()
	o := s.oauth()
	o.mu.Lock()
	defer o.mu.Unlock()
	c, known := o.clients[id]
	if !ok || !known || id != r.PathValue("client") || secret != c.secret {
		writeError(w, http.StatusUnauthorized, "Requires authentication")
		return
	}
	var body struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.AccessToken == "" {
		writeValidationMsg(w, "OauthAccess", "access_token", fmt.Sprintf("access_token is required (%v)", err))
		return
	}
	if _, ok := o.tokens[body.AccessToken]; !ok {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	delete(o.tokens, body.AccessToken)
	w.WriteHeader(http.StatusNoContent)
}
