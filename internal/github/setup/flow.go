package setup

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/go-github/v62/github"
	"github.com/rs/zerolog"
)

// Options configure the setup flow.
type Options struct {
	// Manifest is app.yml, parsed; the flow points its URLs at PublicURL.
	Manifest Manifest
	// PublicURL is where GitHub and the admin's browser reach this server.
	PublicURL string
	// WebURL is GitHub's web address (https://github.com or a GitHub
	// Enterprise Server); APIURL its REST API (https://api.github.com/).
	WebURL, APIURL string
	// DataDir receives the credentials (files mode 0600).
	DataDir string
	// Key guards the setup page: only someone who has the link printed in
	// the server's log may create the app. Empty: the one kept in
	// DataDir/KeyFile, made at random on first use and removed once the
	// app exists, so a restart during setup does not break the link.
	Key string
	// AppName is the name the page suggests for the app. GitHub App names
	// are unique across GitHub, so empty suggests the manifest's name plus
	// six characters derived from the setup key ("perfgate-3fa2c1").
	AppName string
	// Complete is called with the stored credentials; it brings the server
	// out of setup mode. An error is shown on the page.
	Complete func(ctx context.Context, c Credentials) error
	// HTTPClient makes the conversion call; nil means a client with a
	// 30-second timeout.
	HTTPClient *http.Client
	Log        zerolog.Logger
	Now        func() time.Time
}

// stateTTL bounds a page's state: GitHub's code itself expires after an
// hour.
const stateTTL = time.Hour

const keyCookie = "perfgate_setup"

// maxAppName is GitHub's limit on an app's name.
const maxAppName = 34

// Flow is the setup's HTTP side. It is safe for concurrent use.
type Flow struct {
	opts     Options
	manifest Manifest // pointed at PublicURL; the name is the admin's choice
	// base is PublicURL without a trailing slash; prefix is its path ("" or
	// "/perfgate"), which every link the browser follows carries: a proxy
	// that serves perfgate under a path strips it before perfgate sees it.
	base, prefix string

	mu     sync.Mutex
	states map[string]time.Time // issued state → expiry
	done   *Credentials
}

// New builds the flow. It fails when the public URL or the manifest is
// unusable, so the server refuses to start rather than show a broken page.
func New(opts Options) (*Flow, error) {
	m, err := opts.Manifest.ForServer(opts.PublicURL)
	if err != nil {
		return nil, err
	}
	if _, err := m.JSON(); err != nil {
		return nil, err
	}
	if _, err := NewAppURL(opts.WebURL, "", "x"); err != nil {
		return nil, err
	}
	base, _ := PublicBase(opts.PublicURL)
	u, _ := url.Parse(base)
	if opts.Key == "" {
		if opts.Key, err = setupKey(opts.DataDir); err != nil {
			return nil, err
		}
	}
	if opts.AppName == "" {
		sum := sha256.Sum256([]byte("perfgate app name " + opts.Key))
		opts.AppName = m.Name + "-" + hex.EncodeToString(sum[:3])
	}
	if err := checkAppName(opts.AppName); err != nil {
		return nil, fmt.Errorf("setup: suggested app name: %w", err)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if opts.Complete == nil {
		return nil, errors.New("setup: Complete is required")
	}
	return &Flow{opts: opts, manifest: m, base: base, prefix: strings.TrimRight(u.Path, "/"), states: map[string]time.Time{}}, nil
}

// StartURL is the link to open in a browser: the setup page with its key.
// The server logs it; nothing else reveals the key.
func (f *Flow) StartURL() string {
	return f.base + PagePath + "?key=" + f.opts.Key
}

// setupKey returns the key kept in dir, creating it on first use: the
// link in the log stays valid across restarts until the app exists.
func setupKey(dir string) (string, error) {
	if dir == "" {
		return randomHex(16)
	}
	path := filepath.Join(dir, SetupKeyFile)
	b, err := readSecret(path)
	if err == nil {
		if k := strings.TrimSpace(string(b)); len(k) >= 32 {
			return k, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("setup key: %w", err)
	}
	k, err := randomHex(16)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("setup key: %w", err)
	}
	if err := writeSecret(path, []byte(k+"\n")); err != nil {
		return "", fmt.Errorf("setup key: %w", err)
	}
	return k, nil
}

// checkAppName applies GitHub's rules for an app's name that can be
// checked here: not blank, at most 34 characters, printable.
func checkAppName(name string) error {
	switch {
	case strings.TrimSpace(name) == "":
		return errors.New("the app needs a name")
	case utf8.RuneCountInString(name) > maxAppName:
		return fmt.Errorf("%q is longer than GitHub's %d characters", name, maxAppName)
	}
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("%q has a character that is not printable", name)
		}
	}
	return nil
}

// Done returns the credentials once the flow has completed.
func (f *Flow) Done() (Credentials, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done == nil {
		return Credentials{}, false
	}
	return *f.done, true
}

// MarkDone records credentials that came from elsewhere (stored earlier,
// or set by hand), so the page says the app exists instead of offering to
// create another.
func (f *Flow) MarkDone(c Credentials) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.done = &c
}

// Handler serves PagePath and RedirectPath.
func (f *Flow) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PagePath, f.page)
	mux.HandleFunc("POST "+CreatePath, f.create)
	mux.HandleFunc("GET "+ScriptPath, script)
	mux.HandleFunc("GET "+RedirectPath, f.redirect)
	return securityHeaders(f.stripPrefix(mux))
}

// stripPrefix serves the flow whether the proxy in front strips the public
// URL's path or passes it on.
func (f *Flow) stripPrefix(next http.Handler) http.Handler {
	if f.prefix == "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, ok := strings.CutPrefix(r.URL.Path, f.prefix); ok && strings.HasPrefix(p, PagePath) {
			r2 := *r
			u := *r.URL
			u.Path, u.RawPath = p, ""
			r2.URL = &u
			r = &r2
		}
		next.ServeHTTP(w, r)
	})
}

// path is a path on this server as the browser must ask for it.
func (f *Flow) path(p string) string { return f.prefix + p }

// page shows the "create the app" form, or where to install the app once
// it exists.
func (f *Flow) page(w http.ResponseWriter, r *http.Request) {
	if c, ok := f.Done(); ok {
		render(w, http.StatusOK, doneTemplate, doneData{Credentials: c, Installed: r.URL.Query().Get("setup_action") == "install", Prefix: f.prefix})
		return
	}
	// The key arrives once in the URL; it moves to a cookie and out of the
	// address bar (and of any Referer) at once.
	if key := r.URL.Query().Get("key"); key != "" {
		if !f.keyOK(key) {
			render(w, http.StatusForbidden, errorTemplate, errorData{Title: "Wrong setup link", Message: "This setup link's key is not the one this server printed. Open the link from the server's log (\"open … to create the GitHub App\")."})
			return
		}
		//nolint:gosec // HttpOnly and SameSite set; Secure whenever served over HTTPS (a first setup on plain-HTTP localhost needs the cookie too)
		http.SetCookie(w, &http.Cookie{Name: keyCookie, Value: key, Path: f.path(PagePath), HttpOnly: true,
			SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil || strings.HasPrefix(f.opts.PublicURL, "https:"), MaxAge: int(stateTTL / time.Second)})
		q := r.URL.Query()
		q.Del("key")
		target := f.path(PagePath)
		if enc := q.Encode(); enc != "" {
			target += "?" + enc
		}
		http.Redirect(w, r, target, http.StatusSeeOther) //nolint:gosec // target is this page's own path; only the query is the request's
		return
	}
	if !f.cookieOK(r) {
		render(w, http.StatusForbidden, errorTemplate, errorData{Title: "perfgate is in setup mode", Message: "Open the setup link printed in the server's log (\"open … to create the GitHub App\"): only its holder may create the app."})
		return
	}
	org := strings.TrimSpace(r.URL.Query().Get("org"))
	if org != "" && !validOrg(org) {
		f.badOrg(w, org)
		return
	}
	render(w, http.StatusOK, pageTemplate, pageData{Prefix: f.prefix, Org: org, Name: f.opts.AppName, PublicURL: f.opts.PublicURL, WebURL: f.opts.WebURL})
}

// create takes the page's one form (owner and name) and answers with the
// confirmation: the owner and name spelt out, and the manifest form that
// goes to that owner's "new GitHub App" page.
func (f *Flow) create(w http.ResponseWriter, r *http.Request) {
	if _, ok := f.Done(); ok {
		http.Redirect(w, r, f.path(PagePath), http.StatusSeeOther)
		return
	}
	if !f.cookieOK(r) {
		render(w, http.StatusForbidden, errorTemplate, errorData{Title: "Setup refused", Message: "This browser did not open this server's setup link. Open the link from the server's log and try again."})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	if err := r.ParseForm(); err != nil {
		render(w, http.StatusBadRequest, errorTemplate, errorData{Title: "Setup refused", Message: "The form could not be read. Go back and submit it again.", Back: f.path(PagePath)})
		return
	}
	org, name := strings.TrimSpace(r.PostForm.Get("org")), strings.TrimSpace(r.PostForm.Get("name"))
	if org != "" && !validOrg(org) {
		f.badOrg(w, org)
		return
	}
	if name == "" {
		name = f.opts.AppName
	}
	if err := checkAppName(name); err != nil {
		render(w, http.StatusBadRequest, errorTemplate, errorData{Title: "Not a usable app name", Message: err.Error() + ". Go back and choose another.", Back: f.path(PagePath)})
		return
	}
	state, err := f.issueState()
	if err != nil {
		f.opts.Log.Error().Err(err).Msg("setup: issue state")
		render(w, http.StatusInternalServerError, errorTemplate, errorData{Title: "Setup failed", Message: err.Error(), Back: f.path(PagePath)})
		return
	}
	action, err := NewAppURL(f.opts.WebURL, org, state)
	if err != nil {
		render(w, http.StatusInternalServerError, errorTemplate, errorData{Title: "Setup failed", Message: err.Error()})
		return
	}
	m := f.manifest
	m.Name = name
	js, err := m.JSON()
	if err != nil {
		render(w, http.StatusInternalServerError, errorTemplate, errorData{Title: "Setup failed", Message: err.Error()})
		return
	}
	render(w, http.StatusOK, confirmTemplate, confirmData{Prefix: f.prefix, Action: action, Manifest: js, Org: org, Name: name, WebURL: f.opts.WebURL})
}

func (f *Flow) badOrg(w http.ResponseWriter, org string) {
	render(w, http.StatusBadRequest, errorTemplate, errorData{Title: "Not an organisation name", Message: fmt.Sprintf("%q is not a GitHub account name (letters, digits and single hyphens). Go back and correct it.", org), Back: f.path(PagePath)})
}

// redirect receives GitHub's code, exchanges it for the credentials,
// stores them and takes the server out of setup mode.
func (f *Flow) redirect(w http.ResponseWriter, r *http.Request) {
	if c, ok := f.Done(); ok {
		render(w, http.StatusOK, doneTemplate, doneData{Credentials: c, Prefix: f.prefix})
		return
	}
	if !f.cookieOK(r) {
		render(w, http.StatusForbidden, errorTemplate, errorData{Title: "Setup refused", Message: "This browser did not start the setup from this server's setup link. Open the link from the server's log and try again."})
		return
	}
	q := r.URL.Query()
	code, state := q.Get("code"), q.Get("state")
	if !f.takeState(state) {
		render(w, http.StatusBadRequest, errorTemplate, errorData{Title: "Setup refused", Message: "The state in GitHub's answer is unknown, used or over an hour old. Start again from the setup page.", Back: f.path(PagePath)})
		return
	}
	if code == "" || len(code) > 200 {
		render(w, http.StatusBadRequest, errorTemplate, errorData{Title: "Setup refused", Message: "GitHub's answer carried no code. Start again from the setup page.", Back: f.path(PagePath)})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
	defer cancel()
	c, err := f.convert(ctx, code)
	if err != nil {
		f.opts.Log.Error().Err(err).Msg("setup: manifest conversion failed")
		render(w, http.StatusBadGateway, errorTemplate, errorData{Title: "GitHub did not hand over the app", Message: err.Error() + ". A code is valid for one hour and one use: start again from the setup page.", Back: f.path(PagePath)})
		return
	}
	if err := Save(f.opts.DataDir, c); err != nil {
		f.opts.Log.Error().Err(err).Msg("setup: store credentials")
		render(w, http.StatusInternalServerError, errorTemplate, errorData{Title: "Could not store the app's credentials", Message: err.Error() + fmt.Sprintf(". The app %q exists on GitHub: delete it there, fix the data directory and start again.", c.Slug)})
		return
	}
	f.opts.Log.Info().Int64("app_id", c.AppID).Str("slug", c.Slug).Str("owner", c.Owner).Str("dir", f.opts.DataDir).Msg("GitHub App created through the manifest flow; credentials stored")
	if f.opts.DataDir != "" {
		// The link has done its job: a later setup (after the app is
		// deleted) gets a new one.
		if err := os.Remove(filepath.Join(f.opts.DataDir, SetupKeyFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			f.opts.Log.Warn().Err(err).Msg("setup: remove the used setup key")
		}
	}
	if err := f.opts.Complete(ctx, c); err != nil {
		f.opts.Log.Error().Err(err).Msg("setup: leave setup mode")
		render(w, http.StatusInternalServerError, errorTemplate, errorData{Title: "App created, server not started", Message: err.Error() + ". The credentials are stored: restart perfgate serve to use them."})
		return
	}
	f.MarkDone(c)
	render(w, http.StatusOK, doneTemplate, doneData{Credentials: c, Fresh: true, Prefix: f.prefix})
}

// convert calls POST /app-manifests/{code}/conversions.
func (f *Flow) convert(ctx context.Context, code string) (Credentials, error) {
	client := github.NewClient(f.opts.HTTPClient)
	api := f.opts.APIURL
	if !strings.HasSuffix(api, "/") {
		api += "/"
	}
	base, err := url.Parse(api)
	if err != nil || base.Host == "" {
		return Credentials{}, fmt.Errorf("GitHub API URL %q: want e.g. https://api.github.com/", f.opts.APIURL)
	}
	client.BaseURL = base
	cfg, _, err := client.Apps.CompleteAppManifest(ctx, code)
	if err != nil {
		return Credentials{}, fmt.Errorf("exchange the manifest code: %w", err)
	}
	c := Credentials{
		AppID: cfg.GetID(), Slug: cfg.GetSlug(), Name: cfg.GetName(), Owner: cfg.GetOwner().GetLogin(),
		HTMLURL: cfg.GetHTMLURL(), WebhookSecret: cfg.GetWebhookSecret(), PrivateKeyPEM: cfg.GetPEM(),
		ClientID: cfg.GetClientID(), ClientSecret: cfg.GetClientSecret(),
		CreatedAt: f.opts.Now().UTC(),
	}
	if err := c.validate(); err != nil {
		return Credentials{}, fmt.Errorf("GitHub's conversion answer is incomplete: %w", err)
	}
	return c, nil
}

func (f *Flow) keyOK(key string) bool {
	return subtle.ConstantTimeCompare([]byte(key), []byte(f.opts.Key)) == 1
}

func (f *Flow) cookieOK(r *http.Request) bool {
	c, err := r.Cookie(keyCookie)
	return err == nil && f.keyOK(c.Value)
}

func (f *Flow) issueState() (string, error) {
	s, err := randomHex(16)
	if err != nil {
		return "", err
	}
	now := f.opts.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, exp := range f.states {
		if now.After(exp) {
			delete(f.states, k)
		}
	}
	f.states[s] = now.Add(stateTTL)
	return s, nil
}

// takeState consumes a state: each is good for one redirect within the TTL.
func (f *Flow) takeState(s string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	exp, ok := f.states[s]
	delete(f.states, s)
	return ok && s != "" && !f.opts.Now().After(exp)
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random: %w", err)
	}
	return hex.EncodeToString(b), nil
}

func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		// The page posts a form to GitHub; its one script (ScriptPath) only
		// rewords the button as the owner field changes.
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; form-action *; frame-ancestors 'none'; base-uri 'none'")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}
