package server

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/github/setup"
)

func keyPEM(t *testing.T) string {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
}

// clearEnv unsets every PERFGATE_* setting for the test.
func clearEnv(t *testing.T) {
	for _, s := range Settings {
		t.Setenv(s.Env, "")
		os.Unsetenv(s.Env)
		t.Setenv(s.Env+"_FILE", "")
		os.Unsetenv(s.Env + "_FILE")
	}
}

func TestPrepare(t *testing.T) {
	key := keyPEM(t)
	keyFile := filepath.Join(t.TempDir(), "app.pem")
	if err := os.WriteFile(keyFile, []byte(key), 0o600); err != nil {
		t.Fatal(err)
	}
	stored := t.TempDir()
	if err := setup.Save(stored, setup.Credentials{AppID: 77, Slug: "perfgate-acme", WebhookSecret: "stored-webhook-secret-0123456789", PrivateKeyPEM: key}); err != nil {
		t.Fatal(err)
	}
	withClient := t.TempDir()
	if err := setup.Save(withClient, setup.Credentials{AppID: 78, Slug: "perfgate-acme", WebhookSecret: "stored-webhook-secret-0123456789", PrivateKeyPEM: key,
		ClientID: "Iv1.stored", ClientSecret: "stored-client-secret"}); err != nil {
		t.Fatal(err)
	}
	tok := "0123456789abcdef0123"
	tests := []struct {
		name  string
		env   map[string]string
		want  []string // substrings of the error; none: no error
		check func(t *testing.T, c Config, p Prepared)
	}{
		{"bare: setup mode needs a public URL", nil, []string{"PERFGATE_PUBLIC_URL (server.yml public_url): not set"}, nil},
		{"setup mode", map[string]string{"PERFGATE_PUBLIC_URL": "https://perf.example.org"}, nil, func(t *testing.T, c Config, p Prepared) {
			if !p.Setup || !p.CreateToken || !strings.HasSuffix(c.DatabaseURL, "perfgate.db") {
				t.Errorf("prepared %+v, db %s", p, c.DatabaseURL)
			}
		}},
		{"key as a path", map[string]string{"PERFGATE_GITHUB_APP_INTEGRATION_ID": "5", "PERFGATE_GITHUB_APP_WEBHOOK_SECRET": "a-webhook-secret-of-32-characters", "PERFGATE_GITHUB_APP_PRIVATE_KEY": keyFile, "PERFGATE_AGENT_REGISTRATION_TOKEN": tok}, nil,
			func(t *testing.T, c Config, p Prepared) {
				if p.Setup || c.GitHub.App.PrivateKey != key {
					t.Errorf("the key file was not read: setup %v", p.Setup)
				}
			}},
		{"key as PEM", map[string]string{"PERFGATE_GITHUB_APP_INTEGRATION_ID": "5", "PERFGATE_GITHUB_APP_WEBHOOK_SECRET": "a-webhook-secret-of-32-characters", "PERFGATE_GITHUB_APP_PRIVATE_KEY": key, "PERFGATE_AGENT_REGISTRATION_TOKEN": tok}, nil, nil},
		{"secret from a _FILE", map[string]string{"PERFGATE_GITHUB_APP_INTEGRATION_ID": "5", "PERFGATE_GITHUB_APP_WEBHOOK_SECRET_FILE": keyFile + ".secret", "PERFGATE_GITHUB_APP_PRIVATE_KEY": key, "PERFGATE_AGENT_REGISTRATION_TOKEN": tok}, nil,
			func(t *testing.T, c Config, p Prepared) {
				if c.GitHub.App.WebhookSecret != "from-a-file-webhook-secret" {
					t.Errorf("secret %q", c.GitHub.App.WebhookSecret)
				}
			}},
		{"everything wrong at once", map[string]string{"PERFGATE_ADDR": "nonsense", "PERFGATE_LEASE": "soon", "PERFGATE_GITHUB_APP_INTEGRATION_ID": "abc",
			"PERFGATE_GITHUB_APP_PRIVATE_KEY": "/no/such/key.pem", "PERFGATE_NIGHTLY_CRON": "every night", "PERFGATE_AGENT_REGISTRATION_TOKEN": "short"},
			[]string{"PERFGATE_ADDR (server.yml addr)", "PERFGATE_LEASE (server.yml lease)", `PERFGATE_GITHUB_APP_INTEGRATION_ID (server.yml github.app.integration_id): "abc"`,
				"PERFGATE_GITHUB_APP_PRIVATE_KEY (server.yml github.app.private_key): neither PEM text nor a readable file",
				"PERFGATE_GITHUB_APP_WEBHOOK_SECRET (server.yml github.app.webhook_secret): not set", "PERFGATE_NIGHTLY_CRON", "PERFGATE_NIGHTLY_REPOS",
				"PERFGATE_AGENT_REGISTRATION_TOKEN (server.yml agent_registration_token): shorter than 16"}, nil},
		{"stored credentials", map[string]string{"PERFGATE_DATA_DIR": stored}, nil, func(t *testing.T, c Config, p Prepared) {
			if p.Setup || p.Stored == nil || c.GitHub.App.IntegrationID != 77 || c.AppSlug != "perfgate-acme" || !p.CreateToken {
				t.Errorf("prepared %+v, config app %+v slug %q", p, c.GitHub.App.IntegrationID, c.AppSlug)
			}
		}},
		{"stored credentials with the OAuth client: sign-in on", map[string]string{"PERFGATE_DATA_DIR": withClient}, nil, func(t *testing.T, c Config, p Prepared) {
			if c.GitHub.OAuth.ClientID != "Iv1.stored" || c.GitHub.OAuth.ClientSecret != "stored-client-secret" {
				t.Errorf("OAuth client %+v", c.GitHub.OAuth)
			}
		}},
		{"an OAuth client by hand wins over the stored one", map[string]string{"PERFGATE_DATA_DIR": withClient, "PERFGATE_GITHUB_OAUTH_CLIENT_ID": "Iv1.hand", "PERFGATE_GITHUB_OAUTH_CLIENT_SECRET": "hand-secret"}, nil,
			func(t *testing.T, c Config, p Prepared) {
				if c.GitHub.OAuth.ClientID != "Iv1.hand" || c.GitHub.OAuth.ClientSecret != "hand-secret" {
					t.Errorf("OAuth client %+v", c.GitHub.OAuth)
				}
			}},
		{"an OAuth client id without its secret", map[string]string{"PERFGATE_DATA_DIR": stored, "PERFGATE_GITHUB_OAUTH_CLIENT_ID": "Iv1.hand"},
			[]string{"PERFGATE_GITHUB_OAUTH_CLIENT_SECRET (server.yml github.oauth.client_secret): not set, while the client ID is"}, nil},
		{"a short webhook secret", map[string]string{"PERFGATE_GITHUB_APP_INTEGRATION_ID": "5", "PERFGATE_GITHUB_APP_WEBHOOK_SECRET": "hunter2", "PERFGATE_GITHUB_APP_PRIVATE_KEY": key, "PERFGATE_AGENT_REGISTRATION_TOKEN": tok},
			[]string{"PERFGATE_GITHUB_APP_WEBHOOK_SECRET (server.yml github.app.webhook_secret): blank or shorter than 16 characters"}, nil},
		{"an unknown unconfigured mode", map[string]string{"PERFGATE_UNCONFIGURED": "loud", "PERFGATE_PUBLIC_URL": "https://perf.example.org"},
			[]string{`PERFGATE_UNCONFIGURED (server.yml unconfigured): "loud": want quiet or neutral`}, nil},
		{"fleet weights that are not weights", map[string]string{"PERFGATE_PUBLIC_URL": "https://perf.example.org", "PERFGATE_FLEET_WEIGHTS": "acme/inference=4,acme=-1",
			"PERFGATE_FLEET_SHARE_BY": "team"},
			[]string{`PERFGATE_FLEET_SHARE_BY (server.yml fleet.share_by): "team": want repository or installation`,
				"PERFGATE_FLEET_WEIGHTS (server.yml fleet.weights): fleet: weight of acme is -1"}, nil},
		{"fleet weights", map[string]string{"PERFGATE_PUBLIC_URL": "https://perf.example.org", "PERFGATE_FLEET_WEIGHTS": "acme/inference=4, acme=2",
			"PERFGATE_FLEET_SHARE_BY": "repository"}, nil, func(t *testing.T, c Config, p Prepared) {
			sh := c.Fleet.Shares()
			if sh.Weight("acme/inference") != 4 || sh.Weight("acme/x") != 2 || sh.Weight("zeta/y") != 1 || sh.Key("acme/x") != "acme/x" {
				t.Errorf("shares %+v", sh)
			}
		}},
		{"a missing registration token, credentials by hand", map[string]string{"PERFGATE_GITHUB_APP_INTEGRATION_ID": "5", "PERFGATE_GITHUB_APP_WEBHOOK_SECRET": "a-webhook-secret-of-32-characters", "PERFGATE_GITHUB_APP_PRIVATE_KEY": key},
			[]string{"PERFGATE_AGENT_REGISTRATION_TOKEN (server.yml agent_registration_token): not set"}, nil},
	}
	if err := os.WriteFile(keyFile+".secret", []byte("from-a-file-webhook-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			dir := filepath.Join(t.TempDir(), "data") // does not exist yet
			t.Setenv("PERFGATE_DATA_DIR", dir)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			cfg, lerr := LoadConfig("")
			p, perr := Prepare(&cfg)
			var all []string
			for _, err := range []error{lerr, perr} {
				var ce *ConfigError
				if errors.As(err, &ce) {
					all = append(all, ce.Problems...)
				} else if err != nil {
					t.Fatal(err)
				}
			}
			joined := strings.Join(all, "\n")
			for _, w := range tt.want {
				if !strings.Contains(joined, w) {
					t.Errorf("problems lack %q:\n%s", w, joined)
				}
			}
			if len(tt.want) == 0 && len(all) > 0 {
				t.Errorf("unexpected problems:\n%s", joined)
			}
			if len(tt.want) > 0 && len(all) != len(tt.want) {
				t.Errorf("%d problems, want %d:\n%s", len(all), len(tt.want), joined)
			}
			if tt.check != nil && len(all) == 0 {
				tt.check(t, cfg, p)
			}
			// Nothing is created while checking.
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("Prepare created the data directory: %v", err)
			}
		})
	}
}

func TestLoadConfigUnknownKeysInPlainWords(t *testing.T) {
	clearEnv(t)
	path := filepath.Join(t.TempDir(), "server.yml")
	if err := os.WriteFile(path, []byte("addr: \":9000\"\ndatabse_url: x\ngithub:\n  app:\n    webhook_secert: y\nzzz: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadConfig(path)
	var ce *ConfigError
	if !errors.As(err, &ce) || len(ce.Problems) != 3 {
		t.Fatalf("got %v, want three problems", err)
	}
	for i, want := range []string{
		`line 2: unknown key "databse_url" (did you mean "database_url"?)`,
		`line 5: unknown key "github.app.webhook_secert" (did you mean "github.app.webhook_secret"?)`,
		`line 6: unknown key "zzz" (known keys here: addr, data_dir,`,
	} {
		if !strings.Contains(ce.Problems[i], want) {
			t.Errorf("problem %d = %q, want it to contain %q", i, ce.Problems[i], want)
		}
	}
	if strings.Contains(err.Error(), "server.Config") {
		t.Errorf("the error names a Go type: %v", err)
	}
}

func TestLoadConfigFleet(t *testing.T) {
	clearEnv(t)
	path := filepath.Join(t.TempDir(), "server.yml")
	if err := os.WriteFile(path, []byte("fleet:\n  share_by: installation\n  weights:\n    acme: 3\n    zeta: 0.5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	sh := cfg.Fleet.Shares()
	if sh.Key("acme/inference") != "acme" || sh.Weight("acme") != 3 || sh.Weight("zeta") != 0.5 {
		t.Errorf("shares from server.yml = %+v", sh)
	}
	t.Setenv("PERFGATE_FLEET_WEIGHTS", "acme=1")
	if cfg, err = LoadConfig(path); err != nil || cfg.Fleet.Weights["acme"] != 1 || len(cfg.Fleet.Weights) != 1 {
		t.Errorf("the variable replaces the file's weights: %+v, %v", cfg.Fleet, err)
	}
	if err := os.WriteFile(path, []byte("fleet:\n  weight:\n    acme: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(path); err == nil || !strings.Contains(err.Error(), `unknown key "fleet.weight" (did you mean "fleet.weights"?)`) {
		t.Errorf("misspelt key: %v", err)
	}
}
