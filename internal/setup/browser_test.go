package setup_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/perfgate/perfgate/internal/browsertest"
	"github.com/perfgate/perfgate/internal/setup"
)

// The setup page in a real browser: open the link, choose an
// organisation, press the button; Chromium posts the manifest form to the
// test GitHub, follows its redirect back, and lands on the done page.
func TestSetupPageInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped with -short")
	}
	h := newHarness(t)
	ctx := browsertest.Start(t)
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	err := chromedp.Do(ctx,
		chromedp.Navigate(h.flow.StartURL()),
		chromedp.WaitVisible(chromedp.CSS(`#create-app`)),
		chromedp.SendKeys(chromedp.CSS(`#org`), "acme-gpu"),
		chromedp.Click(chromedp.CSS(`#use-org`)),
		chromedp.WaitVisible(chromedp.CSS(`#create-app`)),
	)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	orgValue, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS(`#org`)))
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#create-app`)), chromedp.WaitVisible(chromedp.CSS(`#done`))); err != nil {
		t.Fatalf("browser: %v", err)
	}
	text := func(sel string) string {
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		return v
	}
	heading, slug := text(`#done`), text(`#slug`)
	install, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(`#install`), "href"))
	if err != nil {
		t.Fatal(err)
	}
	installHref := install.Value
	if orgValue != "acme-gpu" || heading != "GitHub App created" || slug != "perfgate" || !strings.HasSuffix(installHref, "/apps/perfgate/installations/new") {
		t.Errorf("org %q, heading %q, slug %q, install link %q", orgValue, heading, slug, installHref)
	}
	apps := h.gh.ManifestApps()
	if len(apps) != 1 || apps[0].Owner != "acme-gpu" || !apps[0].Converted {
		t.Fatalf("apps on GitHub: %+v", apps)
	}
	c, err := setup.Load(h.dir)
	if err != nil || c.AppID != apps[0].ID {
		t.Errorf("stored %+v, %v", c, err)
	}
}
