package githubtest_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"
	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
)

func installationClient(t *testing.T, s *githubtest.Server, keyPEM []byte) *github.Client {
	t.Helper()
	cfg := s.AppConfig()
	if keyPEM != nil {
		cfg.App.PrivateKey = string(keyPEM)
	}
	cc, err := githubapp.NewDefaultCachingClientCreator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cc.NewInstallationClient(githubtest.InstallationID)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestTokenNeedsAppKey(t *testing.T) {
	s := ghtest.New(t)
	other, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	otherPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(other)})
	ctx := context.Background()

	_, _, err = installationClient(t, s, otherPEM).PullRequests.Get(ctx, "acme", "inference", 17)
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("wrong key: err = %v, want a 401", err)
	}
	if got := s.RequestsTo("GET", "/repos/acme/inference/pulls/17"); len(got) != 0 {
		t.Fatalf("API call made without a token: %d", len(got))
	}

	s.SetPullRequest("acme/inference", 17, json.RawMessage(`{"number":17,"head":{"sha":"abc"}}`))
	pr, _, err := installationClient(t, s, nil).PullRequests.Get(ctx, "acme", "inference", 17)
	if err != nil {
		t.Fatalf("right key: %v", err)
	}
	if pr.GetNumber() != 17 {
		t.Errorf("number = %d", pr.GetNumber())
	}
	req := s.RequestsTo("GET", "/repos/acme/inference/pulls/17")[0]
	if !strings.HasPrefix(req.Header.Get("Authorization"), "token ghs_fake") {
		t.Errorf("Authorization = %q", req.Header.Get("Authorization"))
	}
}

func TestUnknownTokenRefused(t *testing.T) {
	s := ghtest.New(t)
	c := github.NewClient(nil).WithAuthToken("ghs_made_up")
	c.BaseURL.Host = strings.TrimPrefix(s.URL, "http://")
	c.BaseURL.Scheme = "http"
	_, resp, err := c.PullRequests.Get(context.Background(), "acme", "inference", 17)
	if err == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("err = %v, want 401", err)
	}
}

func TestCheckRunValidation(t *testing.T) {
	s := ghtest.New(t)
	c := installationClient(t, s, nil)
	ctx := context.Background()
	sha := strings.Repeat("a", 40)
	long := strings.Repeat("x", 65536)
	action := func(label, desc, id string) *github.CheckRunAction {
		return &github.CheckRunAction{Label: label, Description: desc, Identifier: id}
	}
	tests := []struct {
		name  string
		opts  github.CreateCheckRunOptions
		field string // "" means accepted
	}{
		{"ok", github.CreateCheckRunOptions{Name: "perfgate / quick", HeadSHA: sha, Status: github.String("queued")}, ""},
		{"missing name", github.CreateCheckRunOptions{HeadSHA: sha}, "name"},
		{"bad sha", github.CreateCheckRunOptions{Name: "x", HeadSHA: "main"}, "head_sha"},
		{"bad status", github.CreateCheckRunOptions{Name: "x", HeadSHA: sha, Status: github.String("done")}, "status"},
		{"bad conclusion", github.CreateCheckRunOptions{Name: "x", HeadSHA: sha, Conclusion: github.String("warning")}, "conclusion"},
		{"completed without conclusion", github.CreateCheckRunOptions{Name: "x", HeadSHA: sha, Status: github.String("completed")}, "conclusion"},
		{"summary too long", github.CreateCheckRunOptions{Name: "x", HeadSHA: sha, Output: &github.CheckRunOutput{Title: github.String("t"), Summary: github.String(long)}}, "output.summary"},
		{"text too long", github.CreateCheckRunOptions{Name: "x", HeadSHA: sha, Output: &github.CheckRunOutput{Title: github.String("t"), Summary: github.String("s"), Text: github.String(long)}}, "output.text"},
		{"four actions", github.CreateCheckRunOptions{Name: "x", HeadSHA: sha, Actions: []*github.CheckRunAction{action("a", "b", "c"), action("a", "b", "d"), action("a", "b", "e"), action("a", "b", "f")}}, "actions"},
		{"label too long", github.CreateCheckRunOptions{Name: "x", HeadSHA: sha, Actions: []*github.CheckRunAction{action(strings.Repeat("l", 21), "b", "c")}}, "actions[0].label"},
		{"description too long", github.CreateCheckRunOptions{Name: "x", HeadSHA: sha, Actions: []*github.CheckRunAction{action("a", strings.Repeat("d", 41), "c")}}, "actions[0].description"},
		{"identifier too long", github.CreateCheckRunOptions{Name: "x", HeadSHA: sha, Actions: []*github.CheckRunAction{action("a", "b", strings.Repeat("i", 21))}}, "actions[0].identifier"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, resp, err := c.Checks.CreateCheckRun(ctx, "acme", "inference", tt.opts)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			var ge *github.ErrorResponse
			if !errors.As(err, &ge) || resp.StatusCode != http.StatusUnprocessableEntity {
				t.Fatalf("err = %v, want 422", err)
			}
			if len(ge.Errors) != 1 || ge.Errors[0].Field != tt.field {
				t.Errorf("errors = %+v, want field %q", ge.Errors, tt.field)
			}
		})
	}

	// An update with an empty name (go-github v62 always sends the field)
	// must fail the way GitHub would.
	run, _, err := c.Checks.CreateCheckRun(ctx, "acme", "inference", github.CreateCheckRunOptions{Name: "n", HeadSHA: sha})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Checks.UpdateCheckRun(ctx, "acme", "inference", run.GetID(), github.UpdateCheckRunOptions{Status: github.String("in_progress")}); err == nil {
		t.Error("update without a name accepted")
	}
	if _, _, err := c.Checks.UpdateCheckRun(ctx, "acme", "inference", run.GetID(), github.UpdateCheckRunOptions{Name: "n", Conclusion: github.String("success")}); err != nil {
		t.Errorf("update: %v", err)
	}
	got := s.CheckRuns()[1]
	if got.Status != "completed" || got.Conclusion != "success" {
		t.Errorf("run = %+v", got)
	}
}

func TestFilesPaginationAndCap(t *testing.T) {
	s := ghtest.New(t)
	c := installationClient(t, s, nil)
	var files []githubtest.File
	for i := range 3005 {
		files = append(files, githubtest.File{Filename: fmt.Sprintf("f%04d", i)})
	}
	s.SetFiles("acme/inference", 17, files)
	opts := &github.ListOptions{PerPage: 100}
	var seen int
	pages := 0
	for {
		got, resp, err := c.PullRequests.ListFiles(context.Background(), "acme", "inference", 17, opts)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		seen += len(got)
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	if seen != 3000 || pages != 30 {
		t.Errorf("saw %d files over %d pages, want 3000 over 30", seen, pages)
	}
}

func TestContentsAndPermission(t *testing.T) {
	s := ghtest.New(t)
	c := installationClient(t, s, nil)
	ctx := context.Background()
	s.SetContent("acme/inference", "main", ".github/perfgate.yml", []byte("paths: [\"model/**\"]\n"))
	fc, _, _, err := c.Repositories.GetContents(ctx, "acme", "inference", ".github/perfgate.yml", &github.RepositoryContentGetOptions{Ref: "main"})
	if err != nil {
		t.Fatal(err)
	}
	if body, _ := fc.GetContent(); body != "paths: [\"model/**\"]\n" {
		t.Errorf("content = %q", body)
	}
	_, _, resp, err := c.Repositories.GetContents(ctx, "acme", "inference", ".github/perfgate.yml", &github.RepositoryContentGetOptions{Ref: "other"})
	if err == nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("absent ref: err = %v", err)
	}
	s.SetPermission("acme/inference", "monalisa", "write", "maintain")
	p, _, err := c.Repositories.GetPermissionLevel(ctx, "acme", "inference", "monalisa")
	if err != nil || p.GetPermission() != "write" {
		t.Errorf("permission = %v, %v", p, err)
	}
}

func TestScriptedFailures(t *testing.T) {
	s := ghtest.New(t)
	c := installationClient(t, s, nil)
	ctx := context.Background()
	s.SetPullRequest("acme/inference", 17, json.RawMessage(`{"number":17}`))
	s.FailNext("GET", "/repos/acme/inference/pulls/17", 1, http.StatusBadGateway, nil)
	if _, resp, _ := c.PullRequests.Get(ctx, "acme", "inference", 17); resp.StatusCode != http.StatusBadGateway {
		t.Errorf("first call status = %d, want 502", resp.StatusCode)
	}
	reset := time.Now().Add(time.Hour)
	s.RateLimitNext("GET", "/repos/acme/inference/pulls/17", 1, reset)
	_, _, err := c.PullRequests.Get(ctx, "acme", "inference", 17)
	var rl *github.RateLimitError
	if !errors.As(err, &rl) || rl.Rate.Reset.Unix() != reset.Unix() {
		t.Errorf("err = %v, want a RateLimitError resetting at %v", err, reset)
	}
}

// A repository backed by git serves its files at any ref from git, and
// GitHub's branch API says which branches are protected.
func TestContentsFromGitAndBranches(t *testing.T) {
	s := ghtest.New(t)
	c := installationClient(t, s, nil)
	ctx := context.Background()
	r := ghtest.NewGitRepo(t)
	first := r.Commit("config", map[string]string{".github/perfgate.yml": "paths: [\"model/**\"]\n"})
	r.Git("checkout", "--quiet", "-b", "release")
	r.Commit("relax", map[string]string{".github/perfgate.yml": "paths: [\"nothing/**\"]\n"})
	s.SetGitRepo("acme/inference", r.Dir)
	for ref, want := range map[string]string{"main": "paths: [\"model/**\"]\n", first: "paths: [\"model/**\"]\n", "release": "paths: [\"nothing/**\"]\n"} {
		fc, _, _, err := c.Repositories.GetContents(ctx, "acme", "inference", ".github/perfgate.yml", &github.RepositoryContentGetOptions{Ref: ref})
		if err != nil {
			t.Fatalf("ref %s: %v", ref, err)
		}
		if body, _ := fc.GetContent(); body != want {
			t.Errorf("ref %s: content %q, want %q", ref, body, want)
		}
	}
	for _, path := range []string{".github/absent.yml", ".github"} {
		if _, _, resp, err := c.Repositories.GetContents(ctx, "acme", "inference", path, &github.RepositoryContentGetOptions{Ref: "main"}); err == nil || resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: err = %v, want 404", path, err)
		}
	}

	s.SetBranch("acme/inference", "release", first, true)
	s.SetDefaultBranch("acme/inference", "trunk")
	for _, tc := range []struct {
		branch    string
		status    int
		protected bool
	}{{"release", 200, true}, {"trunk", 200, false}, {"main", 404, false}, {"feature/x", 404, false}} {
		b, resp, err := c.Repositories.GetBranch(ctx, "acme", "inference", tc.branch, 0)
		if resp == nil || resp.StatusCode != tc.status || (err == nil) != (tc.status == 200) {
			t.Errorf("branch %s: %v %v, want %d", tc.branch, resp, err, tc.status)
			continue
		}
		if err == nil && (b.GetProtected() != tc.protected || b.GetName() != tc.branch) {
			t.Errorf("branch %s: %+v", tc.branch, b)
		}
	}
	repo, _, err := c.Repositories.Get(ctx, "acme", "inference")
	if err != nil || repo.GetDefaultBranch() != "trunk" {
		t.Errorf("repository: %v %v, want default branch trunk", repo.GetDefaultBranch(), err)
	}
}
