package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/perfgate/perfgate/internal/browsertest"
)

// TestBrowserSignIn signs in through the fake GitHub's OAuth in headless
// Chromium: a private repository's overview and series open, another
// person's private repository is a 404, the front page lists what alice
// may read, and signing out closes it all again.
func TestBrowserSignIn(t *testing.T) {
	if testing.Short() {
		t.Skip("browser tests are not short")
	}
	f := newFixtureWith(t, true)
	f.gh.SignInAs("alice")
	f.gh.Grant("alice", private, true)
	f.gh.Grant("bob", vault, true)
	browser := browsertest.Start(t)
	ctx, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(cancelT)

	ready := chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`))
	text := func(t *testing.T, sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	open := func(t *testing.T, path string) string {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(f.srv.URL+path), ready); err != nil {
			t.Fatalf("open %s: %v", path, err)
		}
		return text(t, "main")
	}
	location := func(t *testing.T) string {
		t.Helper()
		u, err := chromedp.Run(ctx, chromedp.Location())
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimPrefix(u, f.srv.URL)
	}

	if body := open(t, "/r/"+private); !strings.Contains(body, "No dashboard for "+private) {
		t.Fatalf("private repository before sign-in shows:\n%s", body)
	}
	// The 404 page offers the sign-in, which comes back to the page.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#sign-in")), chromedp.WaitVisible(chromedp.CSS("#signed-in")), ready); err != nil {
		t.Fatalf("sign in: %v", err)
	}
	if got := location(t); got != "/r/"+private {
		t.Errorf("after sign-in the browser is at %q, want back at /r/%s", got, private)
	}
	if who := text(t, "#signed-in"); who != "alice" {
		t.Errorf("signed in as %q", who)
	}
	if body := text(t, "main"); !strings.Contains(body, "Open regressions") || !strings.Contains(body, "Benchmarks on the default branch") {
		t.Errorf("private overview after sign-in:\n%.600s", body)
	}
	open(t, "/r/"+private+"/series?key=nightly/c=1&metric=output_throughput")
	points, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`+document.getElementById("chart").dataset.points`))
	if err != nil || points != days {
		t.Errorf("private series chart: %v points (%v), want %d", points, err, days)
	}
	if body := open(t, "/r/"+vault); !strings.Contains(body, "No dashboard for "+vault) {
		t.Errorf("bob's private repository, signed in as alice:\n%.400s", body)
	}
	front := open(t, "/")
	if events := text(t, "#front-events"); !strings.Contains(events, private+":") || !strings.Contains(events, repo+":") {
		t.Errorf("front page's open events:\n%s", events)
	}
	if !strings.Contains(front, private) || !strings.Contains(front, repo) || strings.Contains(front, vault) || !strings.Contains(front, "This week") {
		t.Errorf("front page for alice:\n%.800s", front)
	}

	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#sign-out")), chromedp.WaitVisible(chromedp.CSS("#sign-in")), ready); err != nil {
		t.Fatalf("sign out: %v", err)
	}
	if body := text(t, "main"); strings.Contains(body, private) {
		t.Errorf("after sign-out / still names %s:\n%s", private, body)
	}
	if body := open(t, "/r/"+private); !strings.Contains(body, "No dashboard for "+private) {
		t.Errorf("private repository after sign-out:\n%.400s", body)
	}
	if n := f.gh.UserTokens(); n != 0 {
		t.Errorf("%d user tokens still live at GitHub after sign-out", n)
	}
}
