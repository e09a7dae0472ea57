package setup

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
)

func testKeyPEM(t *testing.T) string {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
}

func TestCredentialsRoundTripAndPermissions(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(dir); !errors.Is(err, ErrNotConfigured) {
		t.Fatalf("empty dir: %v", err)
	}
	c := Credentials{AppID: 7, Slug: "perfgate-acme", WebhookSecret: "s3cret", PrivateKeyPEM: testKeyPEM(t)}
	if err := Save(dir, c); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil || got.AppID != 7 || got.PrivateKeyPEM != c.PrivateKeyPEM || got.WebhookSecret != "s3cret" {
		t.Fatalf("Load = %+v, %v", got, err)
	}
	meta, _ := os.ReadFile(filepath.Join(dir, AppFile))
	if strings.Contains(string(meta), "PRIVATE KEY") {
		t.Error("the key is in the metadata file")
	}
	if err := os.Chmod(filepath.Join(dir, KeyFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("world-readable key: %v", err)
	}
	if err := Save(t.TempDir(), Credentials{AppID: 1, Slug: "x", WebhookSecret: "y", PrivateKeyPEM: "not a key"}); err == nil {
		t.Error("saved a bad key")
	}
}

// The OAuth client the manifest conversion returns is kept like the key:
// the secret in its own 0600 file, never in the metadata, refused when
// others may read it.
func TestClientSecretStoredApart(t *testing.T) {
	dir := t.TempDir()
	c := Credentials{AppID: 7, Slug: "perfgate-acme", WebhookSecret: "s3cret", PrivateKeyPEM: testKeyPEM(t), ClientID: "Iv1.abc", ClientSecret: "client-s3cret"}
	if err := Save(dir, c); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil || got.ClientID != "Iv1.abc" || got.ClientSecret != "client-s3cret" {
		t.Fatalf("Load = %+v, %v", got, err)
	}
	meta, _ := os.ReadFile(filepath.Join(dir, AppFile))
	if strings.Contains(string(meta), "client-s3cret") {
		t.Error("the client secret is in the metadata file")
	}
	if err := os.Chmod(filepath.Join(dir, ClientSecretFile), 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("group-readable client secret: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, ClientSecretFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "secret is missing") {
		t.Errorf("client id without its secret: %v", err)
	}
	c.ClientSecret = ""
	if err := Save(t.TempDir(), c); err == nil {
		t.Error("saved a client id without its secret")
	}
}

func TestRegistrationToken(t *testing.T) {
	dir := t.TempDir()
	if _, err := RegistrationToken(dir, false); err == nil {
		t.Error("no token and create=false: want an error")
	}
	a, err := RegistrationToken(dir, true)
	if err != nil || len(a) != 64 {
		t.Fatalf("create: %q %v", a, err)
	}
	b, err := RegistrationToken(dir, true)
	if err != nil || a != b {
		t.Errorf("second call made a new token: %q vs %q (%v)", a, b, err)
	}
}

func TestCheckPrivateKey(t *testing.T) {
	if err := CheckPrivateKey(testKeyPEM(t)); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"", "/etc/perfgate/key.pem", "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n"} {
		if err := CheckPrivateKey(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}
