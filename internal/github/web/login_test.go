package web_test

import (
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/web"
	"github.com/perfgate/perfgate/internal/store"
)

// browser is an HTTP client with cookies that stops at every redirect, so
// each step of the sign-in can be looked at.
type browser struct {
	t   *testing.T
	c   *http.Client
	jar *cookiejar.Jar
}

func newBrowser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, jar: jar, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) do(method, u string) *http.Response {
	b.t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// signIn walks GET /login → GitHub's authorize → /oauth/callback and
// returns the callback's answer.
func (b *browser) signIn(base, next string) *http.Response {
	b.t.Helper()
	resp := b.do("GET", base+"/login?next="+url.QueryEscape(next))
	if resp.StatusCode != http.StatusFound {
		b.t.Fatalf("GET /login: %d", resp.StatusCode)
	}
	resp = b.do("GET", resp.Header.Get("Location")) // the fake GitHub
	if resp.StatusCode != http.StatusFound {
		b.t.Fatalf("authorize: %d", resp.StatusCode)
	}
	return b.do("GET", resp.Header.Get("Location"))
}

func setCookie(resp *http.Response, name string) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func TestSignIn(t *testing.T) {
	f := newFixtureWith(t, true)
	f.gh.SignInAs("alice")
	f.gh.Grant("alice", private, true)
	f.gh.Grant("bob", vault, true)
	b := newBrowser(t)
	status := func(path string) int { t.Helper(); return b.do("GET", f.srv.URL+path).StatusCode }

	if code := status("/r/" + private); code != http.StatusNotFound {
		t.Fatalf("private repository before sign-in: %d", code)
	}
	resp := b.signIn(f.srv.URL, "/r/"+private)
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/r/"+private {
		t.Fatalf("callback: %d → %q, want back to the page", resp.StatusCode, resp.Header.Get("Location"))
	}
	c := setCookie(resp, "perfgate_session")
	if c == nil || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Secure || c.MaxAge <= 0 || c.MaxAge > int(web.SessionTTL.Seconds()) {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Lax, not Secure over plain HTTP, at most %s", c, web.SessionTTL)
	}
	// GitHub saw the app's own client, the state it sent and the code it got.
	auth := f.gh.RequestsTo("GET", "/login/oauth/authorize")
	tok := f.gh.RequestsTo("POST", "/login/oauth/access_token")
	if len(auth) != 1 || auth[0].Query.Get("client_id") != githubtest.ClientID || auth[0].Query.Get("state") == "" ||
		auth[0].Query.Get("redirect_uri") != f.srv.URL+"/oauth/callback" || len(tok) != 1 || tok[0].Status != 200 {
		t.Fatalf("authorize %+v, access_token %+v", auth, tok)
	}

	for _, tc := range []struct {
		path string
		want int
	}{
		{"/r/" + private, 200},
		{"/r/" + private + "/series?key=nightly/c=1&metric=tpot_p99", 200},
		{"/api/data/repos/" + private + "/series", 200},
		{"/r/" + vault, 404}, // bob's, not alice's
		{"/api/data/repos/" + vault + "/series", 404},
	} {
		if code := status(tc.path); code != tc.want {
			t.Errorf("signed in as alice: GET %s = %d, want %d", tc.path, code, tc.want)
		}
	}
	_, body, _ := get(t, b.c, f.srv.URL+"/api/data/repos")
	if !strings.Contains(body, private) || strings.Contains(body, vault) {
		t.Errorf("/api/data/repos for alice: %s", body)
	}

	// Rotation: after a quarter of an hour the next answer carries a new
	// id; the old one lasts only moments longer.
	old := b.jar.Cookies(mustURL(t, f.srv.URL))[0].Value
	f.advance(16 * time.Minute)
	resp = b.do("GET", f.srv.URL+"/r/"+private)
	if n := setCookie(resp, "perfgate_session"); resp.StatusCode != 200 || n == nil || n.Value == old {
		t.Fatalf("no rotation after 16 minutes: %d %+v", resp.StatusCode, n)
	}
	f.advance(time.Minute)
	stale := newBrowser(t)
	stale.jar.SetCookies(mustURL(t, f.srv.URL), []*http.Cookie{{Name: "perfgate_session", Value: old}})
	if code := stale.do("GET", f.srv.URL+"/r/"+private).StatusCode; code != 404 {
		t.Errorf("the rotated-away id still opens the page: %d", code)
	}

	// Access taken away on GitHub closes the pages once the answer ages.
	f.gh.Grant("alice", private, false)
	f.advance(web.AccessTTL + time.Second)
	if code := status("/r/" + private); code != 404 {
		t.Errorf("after alice lost access: %d", code)
	}
	f.gh.Grant("alice", private, true)
	f.advance(web.AccessTTL + time.Second)
	if code := status("/r/" + private); code != 200 {
		t.Errorf("after alice got access back: %d", code)
	}

	// Sign-out forgets the session and revokes the token at GitHub.
	resp = b.do("POST", f.srv.URL+"/logout")
	if resp.StatusCode != http.StatusSeeOther || f.gh.UserTokens() != 0 {
		t.Errorf("logout: %d, %d user tokens live at GitHub", resp.StatusCode, f.gh.UserTokens())
	}
	if code := status("/r/" + private); code != 404 {
		t.Errorf("after sign-out: %d", code)
	}

	// Signed links keep working without an account.
	anon := newBrowser(t)
	if code := anon.do("GET", f.h.RepoURL(private)).StatusCode; code != 200 {
		t.Errorf("signed link without an account: %d", code)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// A callback that did not start in this browser, or whose code GitHub
// refuses, signs nobody in.
func TestSignInRefusesForgedCallback(t *testing.T) {
	f := newFixtureWith(t, true)
	b := newBrowser(t)
	if code := b.do("GET", f.srv.URL+"/oauth/callback?code=x&state=y").StatusCode; code != http.StatusBadRequest {
		t.Errorf("callback without this browser's state: %d", code)
	}
	resp := b.do("GET", f.srv.URL+"/login")
	state := mustURL(t, resp.Header.Get("Location")).Query().Get("state")
	resp = b.do("GET", f.srv.URL+"/oauth/callback?code=forged&state="+url.QueryEscape(state))
	if resp.StatusCode != http.StatusBadGateway || setCookie(resp, "perfgate_session") != nil {
		t.Errorf("a code GitHub refuses: %d", resp.StatusCode)
	}
	// An open redirect is not on offer.
	resp = b.signIn(f.srv.URL, "//evil.example/")
	if loc := resp.Header.Get("Location"); loc != "/" {
		t.Errorf("next=//evil.example/ sent the browser to %q", loc)
	}
	// Behind a TLS proxy the session cookie is Secure.
	req, _ := http.NewRequest("GET", f.srv.URL+"/login", nil)
	req.Header.Set("X-Forwarded-Proto", "https")
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if c := setCookie(resp, "perfgate_oauth_state"); c == nil || !c.Secure || !c.HttpOnly {
		t.Errorf("state cookie behind TLS: %+v", c)
	}
}

// The front page of a signed-in person: the repositories they may read,
// with their open events, the week's verdicts, the queue and the month.
func TestFrontPage(t *testing.T) {
	f := newFixtureWith(t, true)
	f.advance(time.Until(end.Add(12 * time.Hour))) // the seeded history's last day
	f.gh.SignInAs("alice")
	f.gh.Grant("alice", private, true)
	for _, r := range []string{private, vault} {
		if _, err := f.st.Enqueue(context.Background(), store.JobSpec{Tier: "quick", Kind: "pull_request", Repo: r, PRNumber: 7, HeadSHA: strings.Repeat("a", 40), BaseSHA: strings.Repeat("b", 40)}); err != nil {
			t.Fatal(err)
		}
	}
	b := newBrowser(t)
	_, anon, _ := get(t, b.c, f.srv.URL+"/")
	if !strings.Contains(anon, "Sign in with GitHub") || strings.Contains(anon, private) {
		t.Fatalf("anonymous front page:\n%s", anon)
	}
	b.signIn(f.srv.URL, "/")
	code, body, _ := get(t, b.c, f.srv.URL+"/")
	if code != 200 {
		t.Fatalf("front page: %d\n%s", code, body)
	}
	for _, want := range []string{`id="front-repos"`, `data-repo="` + repo + `"`, `data-repo="` + private + `"`, `href="/r/` + private + `"`,
		`class="event bad" data-repo="` + private + `"`, "This week", `id="front-verdicts"`, `id="front-tally"`, `<span class="reg">`, "The fleet", "0 jobs running and 2 queued across the fleet; yours:", "https://github.com/" + private + "/pull/7", "0 running, 1 queued", `id="front-month"`, "GPU-hours", "alice", "Sign out"} {
		if !strings.Contains(body, want) {
			t.Errorf("front page lacks %q", want)
		}
	}
	if strings.Contains(body, vault) {
		t.Error("front page names bob's private repository")
	}
}
