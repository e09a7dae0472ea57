package githubtest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// The manifest flow (docs.github.com, "Registering a GitHub App from a
// manifest"): a browser POSTs a form with a `manifest` field to
// /settings/apps/new or /organizations/{org}/settings/apps/new; GitHub
// creates the app and redirects to the manifest's redirect_url with a code
// and the state; the app's server exchanges the code within an hour at
// POST /app-manifests/{code}/conversions for the app's ID, key and webhook
// secret. The fake skips GitHub's confirmation page: the POST creates the
// app at once.

// SignedInUser is the account the fake's browser session belongs to: the
// owner of apps created without an organisation.
const SignedInUser = "octocat"

// codeTTL is how long GitHub honours a manifest code.
const codeTTL = time.Hour

// ManifestApp is an app the fake created from a manifest.
type ManifestApp struct {
	ID            int64
	Slug          string
	Owner         string
	Manifest      map[string]any
	WebhookSecret string
	Key           *rsa.PrivateKey
	Code          string
	CodeExpires   time.Time
	Converted     bool
}

// manifestState lives apart from the Server struct's other maps; it is
// created on first use under s.mu.
type manifestState struct {
	apps   []*ManifestApp
	byCode map[string]*ManifestApp
	nextID int64
}

func (s *Server) manifests() *manifestState {
	if s.manifest == nil {
		s.manifest = &manifestState{byCode: map[string]*ManifestApp{}, nextID: 900000}
	}
	return s.manifest
}

// ManifestApps returns the apps created through the manifest flow.
func (s *Server) ManifestApps() []ManifestApp {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ManifestApp
	for _, a := range s.manifests().apps {
		out = append(out, *a)
	}
	return out
}

// ExpireManifestCodes makes every outstanding manifest code older than an
// hour, as if the admin had waited too long.
func (s *Server) ExpireManifestCodes() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.manifests().apps {
		a.CodeExpires = time.Now().Add(-time.Second)
	}
}

func (s *Server) manifestRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /settings/apps/new", s.newAppFromManifest)
	mux.HandleFunc("POST /organizations/{org}/settings/apps/new", s.newAppFromManifest)
	mux.HandleFunc("POST /app-manifests/{code}/conversions", s.convertManifest)
}

var knownEvents = map[string]bool{
	"check_run": true, "check_suite": true, "issue_comment": true, "merge_group": true, "pull_request": true,
	"pull_request_review": true, "pull_request_review_comment": true, "release": true, "push": true,
	"workflow_run": true, "issues": true, "label": true, "status": true,
}

// newAppFromManifest validates the posted manifest as GitHub does and
// redirects to its redirect_url with a code.
func (s *Server) newAppFromManifest(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	raw := r.PostForm.Get("manifest")
	var m map[string]any
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		http.Error(w, "Invalid GitHub App configuration: manifest is not JSON: "+err.Error(), http.StatusUnprocessableEntity)
		return
	}
	if problems := checkManifest(m); len(problems) > 0 {
		http.Error(w, "Invalid GitHub App configuration:\n"+strings.Join(problems, "\n"), http.StatusUnprocessableEntity)
		return
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	owner := r.PathValue("org")
	if owner == "" {
		owner = SignedInUser
	}
	s.mu.Lock()
	ms := s.manifests()
	ms.nextID++
	name := m["name"].(string)
	app := &ManifestApp{
		ID: ms.nextID, Slug: slugify(name), Owner: owner, Manifest: m, Key: key,
		WebhookSecret: randomHex(20), Code: "v1." + randomHex(20), CodeExpires: time.Now().Add(codeTTL),
	}
	ms.apps = append(ms.apps, app)
	ms.byCode[app.Code] = app
	s.mu.Unlock()

	target, _ := url.Parse(m["redirect_url"].(string))
	q := target.Query()
	q.Set("code", app.Code)
	if st := r.URL.Query().Get("state"); st != "" {
		q.Set("state", st)
	}
	target.RawQuery = q.Encode()
	http.Redirect(w, r, target.String(), http.StatusFound)
}

func checkManifest(m map[string]any) []string {
	var problems []string
	str := func(k string) string { v, _ := m[k].(string); return v }
	absolute := func(field, v string) {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			problems = append(problems, fmt.Sprintf("%s %q is not an absolute URL", field, v))
		}
	}
	if str("name") == "" {
		problems = append(problems, "Name can't be blank")
	}
	absolute("url", str("url"))
	absolute("redirect_url", str("redirect_url"))
	if hook, ok := m["hook_attributes"].(map[string]any); ok {
		u, _ := hook["url"].(string)
		absolute("hook_attributes.url", u)
	} else {
		problems = append(problems, "hook_attributes is missing")
	}
	events, _ := m["default_events"].([]any)
	for _, e := range events {
		if s, _ := e.(string); !knownEvents[s] {
			problems = append(problems, fmt.Sprintf("Default events unsupported: %v", e))
		}
	}
	perms, _ := m["default_permissions"].(map[string]any)
	for k, v := range perms {
		if s, _ := v.(string); s != "read" && s != "write" {
			problems = append(problems, fmt.Sprintf("default_permissions.%s: %v is not read or write", k, v))
		}
	}
	return problems
}

// convertManifest is POST /app-manifests/{code}/conversions: no
// authentication, the code is the credential, good once and for an hour.
func (s *Server) convertManifest(w http.ResponseWriter, r *http.Request) {
	code := r.PathValue("code")
	s.mu.Lock()
	app, ok := s.manifests().byCode[code]
	valid := ok && !app.Converted && time.Now().Before(app.CodeExpires)
	if valid {
		app.Converted = true
	}
	s.mu.Unlock()
	if !valid {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(app.Key)})
	now := time.Now().UTC().Format(time.RFC3339)
	ownerType := "Organization"
	if app.Owner == SignedInUser {
		ownerType = "User"
	}
	clientID, clientSecret := "Iv1."+randomHex(8), randomHex(20)
	var callbacks []string
	if cbs, ok := app.Manifest["callback_urls"].([]any); ok {
		for _, cb := range cbs {
			if u, ok := cb.(string); ok {
				callbacks = append(callbacks, u)
			}
		}
	}
	if len(callbacks) == 0 {
		callbacks = []string{"https://callback-url-not-set.invalid/"} // GitHub refuses user sign-in without one
	}
	s.addOAuthClient(clientID, clientSecret, callbacks)
	writeJSON(w, http.StatusCreated, map[string]any{
		"id": app.ID, "slug": app.Slug, "node_id": fmt.Sprintf("A_%d", app.ID),
		"owner": map[string]any{"login": app.Owner, "id": 1, "type": ownerType},
		"name":  app.Manifest["name"], "description": app.Manifest["description"],
		"external_url": app.Manifest["url"], "html_url": s.URL + "/apps/" + app.Slug,
		"created_at": now, "updated_at": now,
		"permissions": app.Manifest["default_permissions"], "events": app.Manifest["default_events"],
		"client_id": clientID, "client_secret": clientSecret,
		"webhook_secret": app.WebhookSecret, "pem": string(keyPEM),
	})
}

// appKey returns the public key of app id: the default test app or one
// made from a manifest.
func (s *Server) appKey(id int64) *rsa.PublicKey {
	if id == AppID {
		return &s.Key.PublicKey
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.manifests().apps {
		if a.ID == id && a.Converted {
			return &a.Key.PublicKey
		}
	}
	return nil
}

func slugify(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-")
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("githubtest: random: %v", err))
	}
	return hex.EncodeToString(b)
}
