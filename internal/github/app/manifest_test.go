package app

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestManifestSubscribesHandledEvents guards app.yml against a handler whose
// event the app never receives, and against listing events GitHub sends
// every app anyway (listing them makes the manifest invalid).
func TestManifestSubscribesHandledEvents(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "app.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Name           string `yaml:"name"`
		Public         bool   `yaml:"public"`
		HookAttributes struct {
			URL string `yaml:"url"`
		} `yaml:"hook_attributes"`
		DefaultEvents      []string          `yaml:"default_events"`
		DefaultPermissions map[string]string `yaml:"default_permissions"`
	}
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatalf("parse app.yml: %v", err)
	}
	if m.Name == "" || m.Public || m.HookAttributes.URL == "" {
		t.Errorf("manifest header = %+v", m)
	}
	automatic := map[string]bool{"installation": true, "installation_repositories": true}
	b2 := &base{}
	handlers := []interface{ Handles() []string }{
		&pullRequestHandler{b2}, &pullRequestReviewHandler{b2}, &issueCommentHandler{b2},
		&checkRunHandler{b2}, &mergeGroupHandler{b2}, &installationHandler{b2}, &releaseHandler{b2},
	}
	for _, h := range handlers {
		for _, ev := range h.Handles() {
			if !automatic[ev] && !slices.Contains(m.DefaultEvents, ev) {
				t.Errorf("handled event %q missing from default_events", ev)
			}
		}
	}
	for _, ev := range m.DefaultEvents {
		if automatic[ev] {
			t.Errorf("default_events lists %q, which GitHub delivers automatically", ev)
		}
	}
	// The calls the handlers make need these; nothing broader.
	want := map[string]string{"checks": "write", "contents": "read", "issues": "write", "pull_requests": "read", "metadata": "read", "merge_queues": "read"}
	for k, v := range want {
		if m.DefaultPermissions[k] != v {
			t.Errorf("permission %s = %q, want %q", k, m.DefaultPermissions[k], v)
		}
	}
	for k := range m.DefaultPermissions {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected permission %s", k)
		}
	}
}
