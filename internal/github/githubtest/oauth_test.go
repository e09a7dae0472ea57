package githubtest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
)

// The fake's sign-in checks what a real GitHub checks: the client, the
// state, the code (once, for its client), the secret; and a user token
// sees a private repository only when the person was granted it.
func TestOAuthSignIn(t *testing.T) {
	t.Parallel()
	s := ghtest.New(t)
	s.SetPrivate("acme/secret", true)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	authorize := func(q url.Values) *http.Response {
		t.Helper()
		resp, err := noRedirect.Get(s.URL + "/login/oauth/authorize?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	cb := "https://perfgate.example/oauth/callback"
	if resp := authorize(url.Values{"client_id": {"Iv1.nobody"}, "redirect_uri": {cb}, "state": {"s"}}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown client: %d", resp.StatusCode)
	}
	if resp := authorize(url.Values{"client_id": {githubtest.ClientID}, "redirect_uri": {cb}}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("no state: %d", resp.StatusCode)
	}
	s.SignInAs("alice")
	resp := authorize(url.Values{"client_id": {githubtest.ClientID}, "redirect_uri": {cb}, "state": {"xyz"}})
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound || loc.Query().Get("state") != "xyz" || loc.Query().Get("code") == "" || !strings.HasPrefix(loc.String(), cb) {
		t.Fatalf("authorize: %d %s", resp.StatusCode, loc)
	}
	code := loc.Query().Get("code")
	exchange := func(secret, code string) map[string]string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, s.URL+"/login/oauth/access_token",
			strings.NewReader(url.Values{"client_id": {githubtest.ClientID}, "client_secret": {secret}, "code": {code}, "redirect_uri": {cb}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Accept", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]string
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if out := exchange("wrong", code); out["error"] != "incorrect_client_credentials" {
		t.Errorf("wrong secret: %v", out)
	}
	out := exchange(githubtest.ClientSecret, code)
	// GitHub's codes are good once.
	if again := exchange(githubtest.ClientSecret, code); again["error"] != "bad_verification_code" {
		t.Errorf("spent code: %v", again)
	}
	tok := out["access_token"]
	if !strings.HasPrefix(tok, "ghu_") {
		t.Fatalf("exchange: %v", out)
	}
	call := func(method, path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, s.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := call("GET", "/user"); code != 200 || !strings.Contains(body, `"login":"alice"`) {
		t.Errorf("GET /user: %d %s", code, body)
	}
	if code, _ := call("GET", "/repos/acme/secret"); code != http.StatusNotFound {
		t.Errorf("private repository without a grant: %d", code)
	}
	if code, _ := call("GET", "/repos/acme/public"); code != http.StatusOK {
		t.Errorf("public repository: %d", code)
	}
	s.Grant("alice", "acme/secret", true)
	if code, _ := call("GET", "/repos/acme/secret"); code != http.StatusOK {
		t.Errorf("granted: %d", code)
	}
	req, _ := http.NewRequest(http.MethodDelete, s.URL+"/applications/"+githubtest.ClientID+"/token", strings.NewReader(`{"access_token":"`+tok+`"}`))
	req.SetBasicAuth(githubtest.ClientID, githubtest.ClientSecret)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("revoke: %v %v", resp, err)
	}
	if code, _ := call("GET", "/user"); code != http.StatusUnauthorized {
		t.Errorf("revoked token still works: %d", code)
	}
}
