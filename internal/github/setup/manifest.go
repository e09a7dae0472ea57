// Package setup creates perfgate's GitHub App through GitHub's manifest
// flow and keeps the credentials GitHub hands back. A server without app
// credentials serves /setup: a page whose button posts the manifest (app.yml
// with the server's own URLs) to GitHub; GitHub creates the app and sends
// the admin's browser to /setup/redirect with a code, which the server
// exchanges for the app's ID, private key and webhook secret
// (POST /app-manifests/{code}/conversions, valid for an hour).
package setup

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Paths the flow uses on perfgate's server.
const (
	PagePath     = "/setup"
	CreatePath   = "/setup/create" // the page's form: owner and name, answered with the confirmation
	ScriptPath   = "/setup/setup.js"
	RedirectPath = "/setup/redirect"
	HookPath     = "/api/github/hook"
	// CallbackPath is where GitHub sends a person back after signing in
	// to the dashboard with the app's OAuth client.
	CallbackPath = "/oauth/callback"
)

// Manifest is a GitHub App manifest, as GitHub's manifest flow reads it.
type Manifest struct {
	Name               string            `yaml:"name" json:"name"`
	Description        string            `yaml:"description" json:"description,omitempty"`
	URL                string            `yaml:"url" json:"url"`
	HookAttributes     HookAttributes    `yaml:"hook_attributes" json:"hook_attributes"`
	RedirectURL        string            `yaml:"redirect_url" json:"redirect_url"`
	CallbackURLs       []string          `yaml:"callback_urls" json:"callback_urls,omitempty"`
	SetupURL           string            `yaml:"setup_url" json:"setup_url,omitempty"`
	SetupOnUpdate      bool              `yaml:"setup_on_update" json:"setup_on_update"`
	Public             bool              `yaml:"public" json:"public"`
	DefaultEvents      []string          `yaml:"default_events" json:"default_events"`
	DefaultPermissions map[string]string `yaml:"default_permissions" json:"default_permissions"`
}

// HookAttributes is the manifest's webhook.
type HookAttributes struct {
	URL    string `yaml:"url" json:"url"`
	Active bool   `yaml:"active" json:"active"`
}

// ParseManifest reads app.yml. Unknown keys are errors: GitHub ignores
// them, so a misspelt permission would silently go missing.
func ParseManifest(data []byte) (Manifest, error) {
	var m Manifest
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&m); err != nil {
		return Manifest{}, fmt.Errorf("app manifest: %w", err)
	}
	if m.Name == "" || len(m.DefaultEvents) == 0 || len(m.DefaultPermissions) == 0 {
		return Manifest{}, errors.New("app manifest: name, default_events and default_permissions are required")
	}
	return m, nil
}

// ForServer returns the manifest with every URL pointing at publicURL, the
// address where GitHub and browsers reach this server.
func (m Manifest) ForServer(publicURL string) (Manifest, error) {
	base, err := PublicBase(publicURL)
	if err != nil {
		return Manifest{}, err
	}
	out := m
	out.URL = base
	out.HookAttributes = HookAttributes{URL: base + HookPath, Active: true}
	out.RedirectURL = base + RedirectPath
	out.SetupURL = base + PagePath
	// Sign in with GitHub: GitHub sends the user back here with the code.
	out.CallbackURLs = []string{base + CallbackPath}
	out.DefaultEvents = append([]string(nil), m.DefaultEvents...)
	out.DefaultPermissions = make(map[string]string, len(m.DefaultPermissions))
	for k, v := range m.DefaultPermissions {
		out.DefaultPermissions[k] = v
	}
	return out, nil
}

// JSON is the manifest as the manifest flow's `manifest` form field wants it.
func (m Manifest) JSON() (string, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("encode app manifest: %w", err)
	}
	return string(b), nil
}

// PublicBase checks a public URL (absolute http or https, no query) and
// returns it without a trailing slash.
func PublicBase(publicURL string) (string, error) {
	u, err := url.Parse(publicURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("public URL %q: want the absolute http(s) address where GitHub and browsers reach this server, e.g. https://perfgate.example.com", publicURL)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// NewAppURL is where the manifest is posted: an organisation's "new GitHub
// App" page, or the signed-in user's when org is empty. webURL is GitHub's
// web address (https://github.com, or a GitHub Enterprise Server's).
func NewAppURL(webURL, org, state string) (string, error) {
	base, err := url.Parse(strings.TrimRight(webURL, "/"))
	if err != nil || base.Scheme == "" || base.Host == "" {
		return "", fmt.Errorf("GitHub web URL %q: want e.g. https://github.com", webURL)
	}
	if org != "" {
		base = base.JoinPath("organizations", org, "settings", "apps", "new")
	} else {
		base = base.JoinPath("settings", "apps", "new")
	}
	base.RawQuery = url.Values{"state": {state}}.Encode()
	return base.String(), nil
}

// validOrg is GitHub's rule for account names: alphanumerics and single
// hyphens, not at either end, at most 39 characters.
func validOrg(s string) bool {
	if s == "" || len(s) > 39 || s[0] == '-' || s[len(s)-1] == '-' || strings.Contains(s, "--") {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}
