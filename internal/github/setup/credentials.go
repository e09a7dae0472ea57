package setup

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Files in the data directory, each written with mode 0600.
const (
	AppFile = "github-app.json"
	KeyFile = "github-app.private-key.pem"
	// ClientSecretFile is the app's OAuth client secret (sign in with
	// GitHub); an app stored before perfgate kept it has none.
	ClientSecretFile      = "github-app.client-secret" //nolint:gosec // a file name, not a secret
	RegistrationTokenFile = "agent-registration-token"
	// SetupKeyFile keeps the setup link's key while the server waits for
	// the app to be created; it is removed once the app exists.
	SetupKeyFile = "setup-key"
)

// ErrNotConfigured means the data directory holds no app credentials yet.
var ErrNotConfigured = errors.New("no GitHub App credentials stored")

// Credentials are what the manifest conversion returns and the server
// needs: the app's identity, its private key and its webhook secret.
type Credentials struct {
	AppID         int64     `json:"app_id"`
	Slug          string    `json:"slug"`
	Name          string    `json:"name"`
	Owner         string    `json:"owner,omitempty"`
	HTMLURL       string    `json:"html_url,omitempty"`
	WebhookSecret string    `json:"webhook_secret"`
	CreatedAt     time.Time `json:"created_at"`
	// ClientID is the app's OAuth client, with which people sign in to
	// the dashboard; empty for an app stored before perfgate kept it.
	ClientID string `json:"client_id,omitempty"`
	// PrivateKeyPEM is kept in its own file (KeyFile), not in AppFile.
	PrivateKeyPEM string `json:"-"`
	// ClientSecret is kept in its own file (ClientSecretFile).
	ClientSecret string `json:"-"`
}

func (c Credentials) validate() error {
	var problems []string
	if c.AppID <= 0 {
		problems = append(problems, "no app id")
	}
	if c.Slug == "" {
		problems = append(problems, "no slug")
	}
	if c.WebhookSecret == "" {
		problems = append(problems, "no webhook secret")
	}
	if err := CheckPrivateKey(c.PrivateKeyPEM); err != nil {
		problems = append(problems, err.Error())
	}
	if (c.ClientID == "") != (c.ClientSecret == "") {
		problems = append(problems, "an OAuth client id without its secret, or a secret without its id")
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// Save writes the credentials to dir: the key first, then AppFile, whose
// presence marks the set as complete. Both are 0600 and replaced
// atomically.
func Save(dir string, c Credentials) error {
	if err := c.validate(); err != nil {
		return fmt.Errorf("save app credentials: %w", err)
	}
	meta, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("save app credentials: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("save app credentials: %w", err)
	}
	if err := writeSecret(filepath.Join(dir, KeyFile), []byte(c.PrivateKeyPEM)); err != nil {
		return err
	}
	if c.ClientSecret != "" {
		if err := writeSecret(filepath.Join(dir, ClientSecretFile), []byte(c.ClientSecret+"\n")); err != nil {
			return err
		}
	}
	return writeSecret(filepath.Join(dir, AppFile), append(meta, '\n'))
}

// Load reads the credentials Save wrote. It returns ErrNotConfigured when
// dir has none, and refuses files other users can read.
func Load(dir string) (Credentials, error) {
	path := filepath.Join(dir, AppFile)
	meta, err := readSecret(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Credentials{}, ErrNotConfigured
	}
	if err != nil {
		return Credentials{}, err
	}
	var c Credentials
	if err := json.Unmarshal(meta, &c); err != nil {
		return Credentials{}, fmt.Errorf("%s: %w (delete it and run the setup again, or set the PERFGATE_GITHUB_APP_* variables)", path, err)
	}
	key, err := readSecret(filepath.Join(dir, KeyFile))
	if err != nil {
		return Credentials{}, err
	}
	c.PrivateKeyPEM = string(key)
	if c.ClientID != "" {
		secret, err := readSecret(filepath.Join(dir, ClientSecretFile))
		if err != nil {
			return Credentials{}, fmt.Errorf("%s names OAuth client %s but its secret is missing: %w", path, c.ClientID, err)
		}
		c.ClientSecret = strings.TrimSpace(string(secret))
	}
	if err := c.validate(); err != nil {
		return Credentials{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// RegistrationToken returns the agent registration token stored in dir,
// creating a random one on first use when create is set.
func RegistrationToken(dir string, create bool) (string, error) {
	path := filepath.Join(dir, RegistrationTokenFile)
	b, err := readSecret(path)
	if err == nil {
		if tok := strings.TrimSpace(string(b)); tok != "" {
			return tok, nil
		}
		err = fs.ErrNotExist
	}
	if !errors.Is(err, fs.ErrNotExist) || !create {
		return "", err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("generate agent registration token: %w", err)
	}
	tok := hex.EncodeToString(raw)
	if err := writeSecret(path, []byte(tok+"\n")); err != nil {
		return "", err
	}
	return tok, nil
}

// CheckPrivateKey checks that pemText is an RSA private key in PEM, as
// GitHub issues them (PKCS#1) or converted to PKCS#8.
func CheckPrivateKey(pemText string) error {
	block, _ := pem.Decode([]byte(pemText))
	if block == nil {
		return errors.New("private key is not PEM (it should start with -----BEGIN RSA PRIVATE KEY-----)")
	}
	if _, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return fmt.Errorf("private key: %s block is not an RSA key: %w", block.Type, err)
	}
	if _, ok := k.(interface{ Size() int }); !ok {
		return errors.New("private key is not an RSA key")
	}
	return nil
}

func writeSecret(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename this finds nothing
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// readSecret reads a credentials file, refusing one that group or others
// may read: a key that has leaked must be rotated, not used.
func readSecret(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s is readable by other users (mode %04o): chmod 600 it, and rotate the secret if others could read it", path, st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}
