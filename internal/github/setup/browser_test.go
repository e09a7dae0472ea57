package setup_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/perfgate/perfgate/internal/browsertest"
	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/setup"
)

// The setup page in a real browser, the way the admin who hit the
// organisation trap used it: open the link, type an organisation and press
// the create button, nothing else on that page. The button's words follow
// the owner field as it is typed; the confirmation names the organisation;
// Chromium posts the manifest to the test GitHub, follows its redirect back
// and lands on the done page, and the app belongs to the organisation.
func TestSetupPageInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped with -short")
	}
	h := newHarnessAt(t, "/perfgate", "", nil) // behind a proxy path, as many are
	ctx := browsertest.Start(t)
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		return v
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(h.flow.StartURL()), chromedp.WaitVisible(chromedp.CSS(`#create-app`))); err != nil {
		t.Fatalf("browser: %v", err)
	}
	if got := text(`#create-app`); got != "Create the GitHub App on your personal account" {
		t.Errorf("button before typing: %q", got)
	}
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS(`#org`), "acme-gpu")); err != nil {
		t.Fatalf("browser: %v", err)
	}
	// The script rewords the button on each keystroke: no "Use" press.
	if got, note := text(`#create-app`), text(`#owner-note`); got != "Create the GitHub App for the organisation acme-gpu" || !strings.Contains(note, "organisation acme-gpu") {
		t.Errorf("button after typing %q, note %q", got, note)
	}
	name, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS(`#name`)))
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#create-app`)), chromedp.WaitVisible(chromedp.CSS(`#confirm`))); err != nil {
		t.Fatalf("browser: %v", err)
	}
	if got := text(`#confirm`); got != "Create "+name+" for the organisation acme-gpu" {
		t.Errorf("confirmation %q", got)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#continue`)), chromedp.WaitVisible(chromedp.CSS(`#done`))); err != nil {
		t.Fatalf("browser: %v", err)
	}
	heading, slug := text(`#done`), text(`#slug`)
	install, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(`#install`), "href"))
	if err != nil {
		t.Fatal(err)
	}
	if heading != "GitHub App created" || !strings.HasPrefix(slug, "perfgate-") || !strings.HasSuffix(install.Value, "/apps/"+slug+"/installations/new") {
		t.Errorf("heading %q, slug %q, install link %q", heading, slug, install.Value)
	}
	apps := h.gh.ManifestApps()
	if len(apps) != 1 || apps[0].Owner != "acme-gpu" || apps[0].Owner == githubtest.SignedInUser || !apps[0].Converted || apps[0].Manifest["name"] != name {
		t.Fatalf("apps on GitHub: %+v", apps)
	}
	c, err := setup.Load(h.dir)
	if err != nil || c.AppID != apps[0].ID || c.Owner != "acme-gpu" {
		t.Errorf("stored %+v, %v", c, err)
	}
}
