package setup

import (
	"strings"
	"testing"

	perfgate "github.com/perfgate/perfgate"
)

func TestManifestForServer(t *testing.T) {
	m, err := ParseManifest(perfgate.AppManifest)
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.ForServer("https://perf.example.org/")
	if err != nil {
		t.Fatal(err)
	}
	if got.URL != "https://perf.example.org" || got.HookAttributes.URL != "https://perf.example.org/api/github/hook" ||
		got.RedirectURL != "https://perf.example.org/setup/redirect" || got.SetupURL != "https://perf.example.org/setup" || !got.HookAttributes.Active {
		t.Errorf("urls: %+v", got)
	}
	js, err := got.JSON()
	if err != nil || strings.Contains(js, "example.com") {
		t.Errorf("JSON still names the placeholder host: %v %s", err, js)
	}
	for _, bad := range []string{"", "perf.example.org", "ftp://x", "https://x/?a=1"} {
		if _, err := m.ForServer(bad); err == nil {
			t.Errorf("ForServer(%q) accepted", bad)
		}
	}
	if _, err := ParseManifest([]byte("name: x\ndefault_events: [push]\ndefault_permissions: {contents: read}\npermisions: {}\n")); err == nil {
		t.Error("a misspelt key was accepted")
	}
}

func TestNewAppURL(t *testing.T) {
	for _, tt := range []struct{ web, org, want string }{
		{"https://github.com", "acme", "https://github.com/organizations/acme/settings/apps/new?state=s1"},
		{"https://github.com/", "", "https://github.com/settings/apps/new?state=s1"},
		{"https://ghe.corp.example/", "perf", "https://ghe.corp.example/organizations/perf/settings/apps/new?state=s1"},
	} {
		got, err := NewAppURL(tt.web, tt.org, "s1")
		if err != nil || got != tt.want {
			t.Errorf("NewAppURL(%q, %q) = %q, %v; want %q", tt.web, tt.org, got, err, tt.want)
		}
	}
}
