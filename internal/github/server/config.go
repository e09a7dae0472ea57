package server

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"go.yaml.in/yaml/v3"

	"github.com/perfgate/perfgate/internal/analysis/fleet"
	"github.com/perfgate/perfgate/internal/github/setup"
	"github.com/perfgate/perfgate/internal/vocab/suggest"
)

// Setting is one server setting: its server.yml key, its environment
// variable and what it means. Settings is the one table LoadConfig, the
// validation and `perfgate serve -h` read.
type Setting struct {
	Key  string // server.yml key, dotted for nested keys
	Env  string // environment variable
	Help string
	// Secret settings may also come from a file named by Env+"_FILE"
	// (systemd's LoadCredential, Kubernetes secret volumes).
	Secret bool
	set    func(c *Config, v string) error
}

// Settings lists every setting. Precedence: defaults < server.yml <
// environment < `perfgate serve` flags.
var Settings = []Setting{
	{Key: "addr", Env: "PERFGATE_ADDR", Help: "listen address (default :8080)", set: str(func(c *Config) *string { return &c.Addr })},
	{Key: "public_url", Env: "PERFGATE_PUBLIC_URL", Help: "where GitHub, browsers and agents reach this server, e.g. https://perfgate.example.com (needed for setup; every check run links to it, and serve warns at start without it)", set: str(func(c *Config) *string { return &c.PublicURL })},
	{Key: "data_dir", Env: "PERFGATE_DATA_DIR", Help: "directory for the SQLite database and the credentials the setup stores (default: the working directory)", set: str(func(c *Config) *string { return &c.DataDir })},
	{Key: "database_url", Env: "PERFGATE_DATABASE_URL", Help: "SQLite file or postgres:// URL (default DATA_DIR/perfgate.db; PostgreSQL for several replicas)", set: str(func(c *Config) *string { return &c.DatabaseURL })},
	{Key: "webhook_door", Env: "PERFGATE_WEBHOOK_DOOR", Help: "process (the default): a small process of its own owns the port, answers each webhook after one append to DATA_DIR/acks and passes every other request on, so GitHub's answer never waits for the server's work; off: the server process answers them", set: str(func(c *Config) *string { return &c.WebhookDoor })},
	{Key: "instance", Env: "PERFGATE_INSTANCE", Help: "this server process's name in its leases; a restarted process reclaims its own at once (default: the host name; give replicas on one host distinct names)", set: str(func(c *Config) *string { return &c.Instance })},
	{Key: "app_slug", Env: "PERFGATE_APP_SLUG", Help: "the app's URL name; its [bot] comments are ignored (default: the stored app's, else perfgate)", set: str(func(c *Config) *string { return &c.AppSlug })},
	{Key: "agent_registration_token", Env: "PERFGATE_AGENT_REGISTRATION_TOKEN", Secret: true, Help: "shared secret runner agents exchange for their own tokens (default: DATA_DIR/agent-registration-token, made by the setup)", set: str(func(c *Config) *string { return &c.AgentRegistrationToken })},
	{Key: "lease", Env: "PERFGATE_LEASE", Help: "job lease; a silent agent's job is re-queued after it (default 2m)", set: dur(func(c *Config) *time.Duration { return &c.Lease })},
	{Key: "long_poll", Env: "PERFGATE_LONG_POLL", Help: "how long an agent's claim waits for a job (default 30s)", set: dur(func(c *Config) *time.Duration { return &c.LongPoll })},
	{Key: "escalate_every", Env: "PERFGATE_ESCALATE_EVERY", Help: "how often due warnings are escalated (default 1m)", set: dur(func(c *Config) *time.Duration { return &c.EscalateEvery })},
	{Key: "nightly_cron", Env: "PERFGATE_NIGHTLY_CRON", Help: `cron expression for the nightly matrix, e.g. "0 3 * * *" (default off)`, set: str(func(c *Config) *string { return &c.NightlyCron })},
	{Key: "nightly_repos", Env: "PERFGATE_NIGHTLY_REPOS", Help: "comma-separated owner/name repositories for the nightly matrix", set: func(c *Config, v string) error {
		c.NightlyRepos = nil
		for _, r := range strings.Split(v, ",") {
			if r = strings.TrimSpace(r); r != "" {
				c.NightlyRepos = append(c.NightlyRepos, r)
			}
		}
		return nil
	}},
	{Key: "unconfigured", Env: "PERFGATE_UNCONFIGURED", Help: `what a repository without .github/perfgate.yml gets: "quiet" (no check; the default) or "neutral" (a neutral "not configured" check linking the docs)`, set: func(c *Config, v string) error {
		if v != "quiet" && v != "neutral" {
			return fmt.Errorf("%q: want quiet or neutral", v)
		}
		c.Unconfigured = v
		return nil
	}},
	{Key: "http.read_timeout", Env: "PERFGATE_HTTP_READ_TIMEOUT", Help: "how long reading one request may take, body included (default 1m)", set: dur(func(c *Config) *time.Duration { return &c.HTTP.ReadTimeout })},
	{Key: "http.write_timeout", Env: "PERFGATE_HTTP_WRITE_TIMEOUT", Help: "how long writing one response may take (default: the long poll plus 1m)", set: dur(func(c *Config) *time.Duration { return &c.HTTP.WriteTimeout })},
	{Key: "http.idle_timeout", Env: "PERFGATE_HTTP_IDLE_TIMEOUT", Help: "how long an idle keep-alive connection stays open (default 1m)", set: dur(func(c *Config) *time.Duration { return &c.HTTP.IdleTimeout })},
	{Key: "http.max_connections", Env: "PERFGATE_HTTP_MAX_CONNECTIONS", Help: "open connections at most; more wait to be accepted (default 1024)", set: func(c *Config, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n <= 0 {
			return fmt.Errorf("%q: want a positive whole number", v)
		}
		c.HTTP.MaxConnections = n
		return nil
	}},
	{Key: "http.max_connections_per_ip", Env: "PERFGATE_HTTP_MAX_CONNECTIONS_PER_IP", Help: "open connections one address may hold; more are closed (default 0: no cap; leave it off behind a reverse proxy, where every connection is the proxy's)", set: func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%q: want a number", v)
		}
		c.HTTP.MaxConnectionsPerIP = n
		return nil
	}},
	{Key: "http.webhook_inflight_bytes", Env: "PERFGATE_WEBHOOK_INFLIGHT_BYTES", Help: "webhook bodies held before their signatures are checked, across all connections, in bytes (default 67108864: 64 MiB)", set: func(c *Config, v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n <= 0 {
			return fmt.Errorf("%q: want a positive whole number of bytes", v)
		}
		c.HTTP.WebhookInFlightBytes = n
		return nil
	}},
	{Key: "fleet.share_by", Env: "PERFGATE_FLEET_SHARE_BY", Help: `who shares the runners fairly within a priority: "repository" (the default) or "installation" (a GitHub account's repositories together)`, set: func(c *Config, v string) error {
		if v != fleet.ShareByRepository && v != fleet.ShareByInstallation {
			return fmt.Errorf("%q: want %s or %s", v, fleet.ShareByRepository, fleet.ShareByInstallation)
		}
		c.Fleet.ShareBy = v
		return nil
	}},
	{Key: "fleet.weights", Env: "PERFGATE_FLEET_WEIGHTS", Help: "fair-share weights, owner/name=W or owner=W, comma-separated (default 1 each; in server.yml a map)", set: func(c *Config, v string) error {
		w, err := fleet.ParseWeights(v)
		if err != nil {
			return err
		}
		c.Fleet.Weights = w
		return nil
	}},
	{Key: "dashboard.signing_key", Env: "PERFGATE_DASHBOARD_SIGNING_KEY", Secret: true, Help: "key that signs the dashboard's links to private repositories (default: derived from the webhook secret)", set: str(func(c *Config) *string { return &c.Dashboard.SigningKey })},
	{Key: "artifacts.dir", Env: "PERFGATE_ARTIFACTS_DIR", Help: "directory for the profile traces runners upload (default DATA_DIR/artifacts)", set: str(func(c *Config) *string { return &c.Artifacts.Dir })},
	{Key: "artifacts.max_bytes", Env: "PERFGATE_ARTIFACTS_MAX_BYTES", Help: "the largest profile trace a runner may upload, in bytes (default 268435456, 256 MiB)", set: artifactsMaxBytes},
	{Key: "artifacts.keep", Env: "PERFGATE_ARTIFACTS_KEEP", Help: `how long a profile trace is kept after its upload, e.g. 30d or 720h (at least 1h), or 0/"forever" to keep all (default 30d); an hourly sweep deletes older ones and files no row references`, set: artifactsKeep},
	{Key: "changepoints.cron", Env: "PERFGATE_CHANGEPOINTS_CRON", Help: `cron expression for the nightly change-point pass (default "30 5 * * *")`, set: str(func(c *Config) *string { return &c.ChangePoints.Cron })},
	{Key: "github.web_url", Env: "PERFGATE_GITHUB_WEB_URL", Help: "GitHub's web address (default https://github.com; a GitHub Enterprise Server's for GHES)", set: str(func(c *Config) *string { return &c.GitHub.WebURL })},
	{Key: "github.v3_api_url", Env: "PERFGATE_GITHUB_V3_API_URL", Help: "GitHub's REST API (default https://api.github.com/; https://HOST/api/v3/ for GHES)", set: str(func(c *Config) *string { return &c.GitHub.V3APIURL })},
	{Key: "github.v4_api_url", Env: "PERFGATE_GITHUB_V4_API_URL", Help: "GitHub's GraphQL API (default https://api.github.com/graphql)", set: str(func(c *Config) *string { return &c.GitHub.V4APIURL })},
	{Key: "github.app.integration_id", Env: "PERFGATE_GITHUB_APP_INTEGRATION_ID", Help: "the app's ID (default: the one the setup stored)", set: func(c *Config, v string) error {
		id, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || id <= 0 {
			c.GitHub.App.IntegrationID = -1 // given, but wrong: Prepare must not call it missing
			return fmt.Errorf("%q is not the app's ID: want the positive integer on the app's settings page", v)
		}
		c.GitHub.App.IntegrationID = id
		return nil
	}},
	{Key: "github.app.webhook_secret", Env: "PERFGATE_GITHUB_APP_WEBHOOK_SECRET", Secret: true, Help: "the app's webhook secret (default: the one the setup stored)", set: str(func(c *Config) *string { return &c.GitHub.App.WebhookSecret })},
	{Key: "github.app.private_key", Env: "PERFGATE_GITHUB_APP_PRIVATE_KEY", Help: "the app's private key: the PEM text, or the path of the .pem file (default: the one the setup stored)", set: str(func(c *Config) *string { return &c.GitHub.App.PrivateKey })},
	{Key: "github.oauth.client_id", Env: "PERFGATE_GITHUB_OAUTH_CLIENT_ID", Help: "the app's Client ID (its settings page), with which people sign in to the dashboard with GitHub; unset with no stored one: no sign-in, private pages open through signed links only (default: the one the setup stored)", set: str(func(c *Config) *string { return &c.GitHub.OAuth.ClientID })},
	{Key: "github.oauth.client_secret", Env: "PERFGATE_GITHUB_OAUTH_CLIENT_SECRET", Secret: true, Help: "a client secret generated on the app's settings page, for the Client ID above (default: the one the setup stored)", set: str(func(c *Config) *string { return &c.GitHub.OAuth.ClientSecret })},
}

func str(field func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *field(c) = v; return nil }
}

func dur(field func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return fmt.Errorf("%q is not a duration: write e.g. 2m or 30s", v)
		}
		*field(c) = d
		return nil
	}
}

// ConfigError lists every problem found in one pass, each naming its
// variable and server.yml key.
type ConfigError struct {
	Problems []string
}

func (e *ConfigError) Error() string {
	if len(e.Problems) == 1 {
		return "server configuration: " + e.Problems[0]
	}
	return fmt.Sprintf("server configuration: %d problems:\n  - %s", len(e.Problems), strings.Join(e.Problems, "\n  - "))
}

// LoadConfig reads the server configuration: defaults, then the YAML file
// at path (optional), then the PERFGATE_* environment variables. It
// reports every unknown key and unparsable value at once; Prepare checks
// the result.
func LoadConfig(path string) (Config, error) {
	cfg := Config{Addr: ":8080"}
	cfg.GitHub.V3APIURL = "https://api.github.com/"
	cfg.GitHub.V4APIURL = "https://api.github.com/graphql"
	cfg.GitHub.WebURL = "https://github.com"
	var problems []string
	if path != "" {
		problems = append(problems, loadFile(&cfg, path)...)
	}
	for _, s := range Settings {
		// An empty variable counts as unset: compose's ${VAR:-} and
		// Kubernetes' optional secrets give "".
		v := os.Getenv(s.Env)
		ok, src := v != "", s.Env
		if !ok && s.Secret {
			file := os.Getenv(s.Env + "_FILE")
			if file == "" {
				continue
			}
			b, err := os.ReadFile(file)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s_FILE (server.yml %s): %v", s.Env, s.Key, err))
				continue
			}
			v, ok, src = strings.TrimSpace(string(b)), true, s.Env+"_FILE"
		}
		if !ok {
			continue
		}
		if err := s.set(&cfg, v); err != nil {
			problems = append(problems, fmt.Sprintf("%s (server.yml %s): %v", src, s.Key, err))
		}
	}
	if len(problems) > 0 {
		return cfg, &ConfigError{Problems: problems}
	}
	return cfg, nil
}

// loadFile decodes server.yml, naming unknown keys with their line and the
// closest known key instead of yaml's "field x not found in type …".
func loadFile(cfg *Config, path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		return []string{fmt.Sprintf("read server config: %v", err)}
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return []string{fmt.Sprintf("%s: %v", path, err)}
	}
	if len(root.Content) == 0 {
		return nil // an empty file
	}
	// Unknown keys and values of the wrong type come in one report.
	problems := unknownKeys(path, root.Content[0], reflect.TypeOf(Config{}), "")
	if err := root.Content[0].Decode(cfg); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			for _, e := range te.Errors {
				problems = append(problems, fmt.Sprintf("%s %s", path, e))
			}
		} else {
			problems = append(problems, fmt.Sprintf("%s: %v", path, strings.TrimPrefix(err.Error(), "yaml: ")))
		}
	}
	sort.SliceStable(problems, func(i, j int) bool { return problemLine(problems[i]) < problemLine(problems[j]) })
	return problems
}

var problemLineRE = regexp.MustCompile(` line ([0-9]+): `)

// problemLine is the line a problem names (0 when none), to list a file's
// problems top to bottom.
func problemLine(p string) int {
	if m := problemLineRE.FindStringSubmatch(p); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

func unknownKeys(path string, n *yaml.Node, t reflect.Type, prefix string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind != yaml.MappingNode || t.Kind() != reflect.Struct {
		return nil
	}
	fields := map[string]reflect.Type{}
	var names []string
	var collect func(t reflect.Type)
	collect = func(t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
			if tag == "-" || !f.IsExported() {
				continue
			}
			if f.Anonymous && tag == "" {
				collect(f.Type)
				continue
			}
			if tag == "" {
				tag = strings.ToLower(f.Name)
			}
			fields[tag] = f.Type
			names = append(names, tag)
		}
	}
	collect(t)
	var problems []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		ft, ok := fields[k.Value]
		if !ok {
			msg := fmt.Sprintf("%s line %d: unknown key %q", path, k.Line, prefix+k.Value)
			if s := suggest.Closest(k.Value, names); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", prefix+s)
			} else {
				msg += fmt.Sprintf(" (known keys here: %s)", strings.Join(names, ", "))
			}
			problems = append(problems, msg)
			continue
		}
		problems = append(problems, unknownKeys(path, n.Content[i+1], ft, prefix+k.Value+".")...)
	}
	return problems
}

// Prepared is what Prepare decided.
type Prepared struct {
	// Setup: no app credentials anywhere; serve the setup page until the
	// manifest flow completes.
	Setup bool
	// Stored: the credentials came from the data directory.
	Stored *setup.Credentials
	// CreateToken: no registration token is configured; one is generated
	// into the data directory before agents need it.
	CreateToken bool
}

// Prepare checks every setting at once, before anything is created: each
// problem names its variable and key. It fills the defaults that depend on
// other settings (the database in the data directory, the stored app
// credentials, a private key given as a path).
func Prepare(cfg *Config) (Prepared, error) {
	var p Prepared
	var problems []string
	bad := func(env, format string, a ...any) {
		key := env
		for _, s := range Settings {
			if s.Env == env {
				key = s.Key
			}
		}
		problems = append(problems, fmt.Sprintf("%s (server.yml %s): %s", env, key, fmt.Sprintf(format, a...)))
	}
	checkAddresses(cfg, bad)
	cfg.DatabaseURL = cfg.Database()
	if cfg.DataDir == "" {
		cfg.DataDir = "."
	}
	checkDataDir(cfg, bad)
	switch cfg.WebhookDoor {
	case "":
		cfg.WebhookDoor = "process"
	case "process", "off":
	default:
		bad("PERFGATE_WEBHOOK_DOOR", "%q is not process or off", cfg.WebhookDoor)
	}
	checkSchedules(cfg, bad)
	checkGitHubURLs(cfg, bad)
	appCredentials(cfg, &p, bad)
	registrationToken(cfg, &p, bad)
	if len(problems) > 0 {
		return p, &ConfigError{Problems: problems}
	}
	return p, nil
}

// reportFunc records a problem with the setting env.
type reportFunc func(env, format string, a ...any)

// checkAddresses checks the listen address and the public URL.
func checkAddresses(cfg *Config, bad reportFunc) {
	if _, port, err := net.SplitHostPort(cfg.Addr); err != nil || port == "" {
		bad("PERFGATE_ADDR", "%q is not a listen address: write e.g. :8080 or 127.0.0.1:8080", cfg.Addr)
	}
	if cfg.PublicURL != "" {
		if _, err := setup.PublicBase(cfg.PublicURL); err != nil {
			bad("PERFGATE_PUBLIC_URL", "%v", err)
		}
	}
}

// checkDataDir checks that the data directory is one, or can be made.
func checkDataDir(cfg *Config, bad reportFunc) {
	if st, err := os.Stat(cfg.DataDir); err == nil && !st.IsDir() {
		bad("PERFGATE_DATA_DIR", "%s is a file, not a directory", cfg.DataDir)
	} else if err != nil && !os.IsNotExist(err) {
		bad("PERFGATE_DATA_DIR", "%v", err)
	} else if os.IsNotExist(err) {
		if pst, perr := os.Stat(filepath.Dir(filepath.Clean(cfg.DataDir))); perr != nil || !pst.IsDir() {
			bad("PERFGATE_DATA_DIR", "%s does not exist and neither does its parent: create it (systemd: StateDirectory=perfgate)", cfg.DataDir)
		}
	}
}

// checkSchedules checks the settings of the fleet, the agents' lease and
// the nightly schedule.
func checkSchedules(cfg *Config, bad reportFunc) {
	if cfg.Unconfigured != "" && cfg.Unconfigured != "quiet" && cfg.Unconfigured != "neutral" {
		bad("PERFGATE_UNCONFIGURED", "%q: want quiet or neutral", cfg.Unconfigured)
	}
	if err := cfg.Fleet.Shares().Validate(); err != nil {
		bad("PERFGATE_FLEET_WEIGHTS", "%v", err)
	}
	if cfg.Lease > 0 && cfg.LongPoll >= cfg.Lease {
		bad("PERFGATE_LONG_POLL", "%s must be shorter than the lease (%s)", cfg.LongPoll, cfg.Lease)
	}
	if cfg.NightlyCron != "" {
		if _, err := cron.ParseStandard(cfg.NightlyCron); err != nil {
			bad("PERFGATE_NIGHTLY_CRON", "%q: %v (write e.g. \"0 3 * * *\")", cfg.NightlyCron, err)
		}
		if len(cfg.NightlyRepos) == 0 {
			bad("PERFGATE_NIGHTLY_REPOS", "the nightly schedule is on but names no repository (owner/name,…)")
		}
	}
	for _, r := range cfg.NightlyRepos {
		if o, n, ok := strings.Cut(r, "/"); !ok || o == "" || n == "" || strings.Contains(n, "/") {
			bad("PERFGATE_NIGHTLY_REPOS", "%q is not owner/name", r)
		}
	}
}

// checkGitHubURLs checks GitHub's web and API URLs.
func checkGitHubURLs(cfg *Config, bad reportFunc) {
	for _, u := range []struct{ env, v string }{
		{"PERFGATE_GITHUB_WEB_URL", cfg.GitHub.WebURL}, {"PERFGATE_GITHUB_V3_API_URL", cfg.GitHub.V3APIURL}, {"PERFGATE_GITHUB_V4_API_URL", cfg.GitHub.V4APIURL},
	} {
		if pu, err := url.Parse(u.v); err != nil || (pu.Scheme != "https" && pu.Scheme != "http") || pu.Host == "" {
			bad(u.env, "%q is not an absolute http(s) URL", u.v)
		}
	}

}

// appCredentials checks the GitHub App's credentials, given all three or
// none; with none it loads the ones the setup stored, or marks setup mode.
func appCredentials(cfg *Config, p *Prepared, bad reportFunc) {
	app := &cfg.GitHub.App
	given := map[string]bool{
		"PERFGATE_GITHUB_APP_INTEGRATION_ID": app.IntegrationID != 0,
		"PERFGATE_GITHUB_APP_WEBHOOK_SECRET": app.WebhookSecret != "",
		"PERFGATE_GITHUB_APP_PRIVATE_KEY":    app.PrivateKey != "",
	}
	if app.PrivateKey != "" {
		key, err := privateKey(app.PrivateKey)
		if err != nil {
			bad("PERFGATE_GITHUB_APP_PRIVATE_KEY", "%v", err)
		}
		app.PrivateKey = key
	}
	n := 0
	for _, ok := range given {
		if ok {
			n++
		}
	}
	switch {
	case n == 3:
		if len(strings.TrimSpace(app.WebhookSecret)) < 16 {
			bad("PERFGATE_GITHUB_APP_WEBHOOK_SECRET", "blank or shorter than 16 characters: anyone could guess it; set a long random secret on the GitHub App and here (openssl rand -hex 32)")
		}
	case n > 0:
		for _, env := range []string{"PERFGATE_GITHUB_APP_INTEGRATION_ID", "PERFGATE_GITHUB_APP_WEBHOOK_SECRET", "PERFGATE_GITHUB_APP_PRIVATE_KEY"} {
			if !given[env] {
				bad(env, "not set, while other app credentials are: set all three, or none to use the ones the setup stored in %s", cfg.DataDir)
			}
		}
	default:
		c, err := setup.Load(cfg.DataDir)
		switch {
		case err == nil:
			p.Stored = &c
			app.IntegrationID, app.WebhookSecret, app.PrivateKey = c.AppID, c.WebhookSecret, c.PrivateKeyPEM
			if oauth := &cfg.GitHub.OAuth; oauth.ClientID == "" && oauth.ClientSecret == "" {
				oauth.ClientID, oauth.ClientSecret = c.ClientID, c.ClientSecret
			}
			if cfg.AppSlug == "" {
				cfg.AppSlug = c.Slug
			}
		case errors.Is(err, setup.ErrNotConfigured):
			p.Setup = true
			if cfg.PublicURL == "" {
				bad("PERFGATE_PUBLIC_URL", "not set: with no GitHub App credentials perfgate starts in setup mode, which needs the URL where GitHub and your browser reach it (or set the PERFGATE_GITHUB_APP_* variables)")
			}
		default:
			bad("PERFGATE_DATA_DIR", "stored app credentials: %v", err)
		}
	}
	if oauth := cfg.GitHub.OAuth; (oauth.ClientID == "") != (oauth.ClientSecret == "") {
		if oauth.ClientID == "" {
			bad("PERFGATE_GITHUB_OAUTH_CLIENT_ID", "not set, while its client secret is: set both (the app's settings page shows the Client ID), or neither to turn sign-in off")
		} else {
			bad("PERFGATE_GITHUB_OAUTH_CLIENT_SECRET", "not set, while the client ID is: generate a client secret on the app's settings page and set it, or unset the ID to turn sign-in off")
		}
	}
}

// registrationToken finds the agents' registration token: given, stored
// in the data directory, or to be created there by a setup.
func registrationToken(cfg *Config, p *Prepared, bad reportFunc) {
	if cfg.AgentRegistrationToken == "" {
		tok, err := setup.RegistrationToken(cfg.DataDir, false)
		switch {
		case err == nil:
			cfg.AgentRegistrationToken = tok
		case (p.Setup || p.Stored != nil) && os.IsNotExist(err):
			p.CreateToken = true
		case os.IsNotExist(err):
			bad("PERFGATE_AGENT_REGISTRATION_TOKEN", "not set: runner agents could not register; set a long random secret (openssl rand -hex 32) and give it to your agents")
		default:
			bad("PERFGATE_AGENT_REGISTRATION_TOKEN", "%v", err)
		}
	} else if len(strings.TrimSpace(cfg.AgentRegistrationToken)) < 16 {
		bad("PERFGATE_AGENT_REGISTRATION_TOKEN", "shorter than 16 characters: use a long random secret (openssl rand -hex 32)")
	}
}

// Database is where the server keeps its store: the database URL, else
// perfgate.db in the data directory (the working directory when unset).
// perfgate serve and every operator command that reads the store find it
// here.
func (c Config) Database() string {
	if c.DatabaseURL != "" {
		return c.DatabaseURL
	}
	dir := c.DataDir
	if dir == "" {
		dir = "."
	}
	return filepath.Join(dir, "perfgate.db")
}

// StoreLocation is where the server's store is and the setting that said
// so, for an operator command to name where it looked.
type StoreLocation struct {
	DSN  string
	From string
}

// LocateStore finds the server's store as perfgate serve does: the server
// config file at configPath (optional), then the PERFGATE_* variables
// over it, then Database.
func LocateStore(configPath string) (StoreLocation, error) {
	cfg, err := LoadConfig(configPath)
	if err != nil {
		return StoreLocation{}, err
	}
	loc := StoreLocation{DSN: cfg.Database()}
	in := "server config " + configPath
	switch {
	case os.Getenv("PERFGATE_DATABASE_URL") != "":
		loc.From = "PERFGATE_DATABASE_URL"
	case cfg.DatabaseURL != "":
		loc.From = "database_url in " + in
	case os.Getenv("PERFGATE_DATA_DIR") != "":
		loc.From = "PERFGATE_DATA_DIR=" + cfg.DataDir
	case cfg.DataDir != "":
		loc.From = "data_dir in " + in
	default:
		loc.From = "the working directory: neither PERFGATE_DATA_DIR, PERFGATE_DATABASE_URL nor a server config (PERFGATE_CONFIG) is set"
	}
	return loc, nil
}

// privateKey accepts the PEM text itself or the path of a PEM file and
// returns the PEM text, checked.
func privateKey(v string) (string, error) {
	if !strings.Contains(v, "-----BEGIN") {
		b, err := os.ReadFile(strings.TrimSpace(v))
		if err != nil {
			return "", fmt.Errorf("neither PEM text nor a readable file: %w", err)
		}
		v = string(b)
	}
	if err := setup.CheckPrivateKey(v); err != nil {
		return "", err
	}
	return v, nil
}
