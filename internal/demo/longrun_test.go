package demo

import (
	"context"
	"image/color"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/browsertest"
	"github.com/perfgate/perfgate/internal/runner/sim"
	"github.com/perfgate/perfgate/internal/vocab/config"
)

// The long-run scenarios' repository config and engine knobs are valid,
// and the knob that moves the knee is the only one the PR changes.
func TestLongRunConfigValid(t *testing.T) {
	t.Parallel()
	c, err := config.Parse(config.DefaultPath, []byte(longRunConfig("/usr/bin/perfgate", 0, 40*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Capacity.On || !c.Soak.On || c.Capacity.Sweeps != 1 || c.Soak.Window.D() != 1300*time.Millisecond || c.Soak.Thresholds.MemoryNoiseMB != 48 {
		t.Errorf("long-run tiers: %+v %+v", c.Capacity, c.Soak)
	}
	for _, blocks := range []int{64, 9} {
		if _, err := sim.ParseConfig("sim.yaml", []byte(longRunKnobs(blocks, 0)), sim.DefaultConfig()); err != nil {
			t.Fatalf("%d blocks: %v", blocks, err)
		}
	}
}

// TestCapacityScenario runs `perfgate demo --scenario capacity` end to
// end: the runner sweeps base and head from their own checkouts, the
// server judges the knees and posts the curve's table on PR #31, and the
// check page shows the curve with both knees in headless Chromium.
func TestCapacityScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: sweeps two engines to their knees (about three minutes)")
	}
	// Beside the other scenarios, which mostly wait on their engines'
	// clocks: a sweep refuses a rate whose arrivals the host sent late
	// (schedule lag), and three refusals make the check "cannot tell",
	// which this test accepts (below); run alone it held the package's
	// other scenarios back by its whole length (about 100 s of the
	// suite's critical path).
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	var log strings.Builder
	dir := t.TempDir()
	out, err := RunCapacity(ctx, Options{Dir: dir, Perfgate: perfgateBin, Log: zerolog.Nop(), Out: &log})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	t.Log("\n" + log.String())
	rep := out.Verdict.Report
	switch {
	case rep.Verdict == gate.Regression && rep.Rule == gate.RuleCapacity:
	case rep.Verdict == gate.Inconclusive && rep.Rule == gate.RuleCannotTell:
		// The machine was too busy for a sweep (the client's self-check
		// failed at a rate three times): the check must say that, never
		// call the smaller cache an improvement.
		if ch := out.Check; ch.Conclusion != "neutral" || !strings.Contains(ch.Summary, rep.Headline) || !strings.Contains(rep.Headline, "cannot tell") {
			t.Errorf("a distorted sweep's check: %s %q\n%s", ch.Conclusion, ch.Title, ch.Summary)
		}
		t.Logf("the host distorted a sweep, so the check cannot tell (allowed on a busy machine): %s", rep.Headline)
		return
	default:
		t.Errorf("verdict %s (%s), want regression (or cannot tell, on a busy machine)", rep.Verdict, rep.Headline)
	}
	bl, hl := out.Verdict.Base.Steps[0], out.Verdict.Head.Steps[0]
	if d := hl.TPOTp50ms/bl.TPOTp50ms - 1; d > 0.15 || d < -0.15 {
		t.Errorf("light-load TPOT %.1f → %.1f ms: the PR was to leave it alone", bl.TPOTp50ms, hl.TPOTp50ms)
	}
	// The check run went through its lifecycle and warns (neutral) with
	// the table; the author was told.
	if ch := out.Check; ch.Conclusion != "neutral" || strings.Join(ch.Statuses, " ") != "queued in_progress completed" ||
		ch.Title != "Warning: 1 metric regressed" || !strings.Contains(ch.Summary, rep.Headline) || !strings.Contains(ch.Summary, "◆") {
		t.Errorf("perfgate / capacity: %v %s %q\n%s", ch.Statuses, ch.Conclusion, ch.Title, ch.Summary)
	}

	bctx, bcancel := context.WithTimeout(browsertest.Start(t), time.Minute)
	defer bcancel()
	if err := chromedp.Do(bctx, chromedp.Navigate("file://"+out.Page), chromedp.WaitVisible(chromedp.CSS(`#curve svg`))); err != nil {
		t.Fatal(err)
	}
	knees, err := chromedp.Run(bctx, chromedp.Evaluate[any](`document.querySelectorAll("#curve line.knee").length`))
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := knees.(float64); n != 2 {
		t.Errorf("the check page marks %v knees, want base's and head's", knees)
	}
	why, err := chromedp.Run(bctx, chromedp.Evaluate[any](`document.querySelector("#headline").textContent`))
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := why.(string); s != rep.Headline || !strings.Contains(s, "head failed at") {
		t.Errorf("the check page says %q, the verdict document %q", why, rep.Headline)
	}
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	img := browsertest.Screenshot(t, "capacity-page", png)
	// Both curves drawn: the base's blue and the head's red are on screen.
	for name, c := range map[string]color.RGBA{"base": {0x1f, 0x77, 0xb4, 0xff}, "head": {0xd6, 0x27, 0x28, 0xff}} {
		if n := browsertest.Count(img, img.Bounds(), c, 24); n < 200 {
			t.Errorf("%s's curve: %d pixels of its colour on the page", name, n)
		}
	}
	_ = os.Remove(out.Page)
}

// TestSoakScenario runs `perfgate demo --scenario soak` end to end: the
// runner soaks each PR's engine process, the leaking one fails on RSS
// growth, the clean one passes.
func TestSoakScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: soaks two engines for 40 s each")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	var log strings.Builder
	out, err := RunSoak(ctx, Options{Dir: t.TempDir(), Perfgate: perfgateBin, Log: zerolog.Nop(), Out: &log, SoakDuration: 40 * time.Second})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	t.Log("\n" + log.String())
	if out.Leak.Report.Pass || out.LeakCheck.Conclusion != "neutral" || !strings.HasPrefix(out.LeakCheck.Title, "Warning: ") || !strings.Contains(out.LeakCheck.Summary, "Regression: rss +") {
		t.Errorf("the leaking PR's perfgate / soak: %s %q\n%s", out.LeakCheck.Conclusion, out.LeakCheck.Title, out.LeakCheck.Summary)
	}
	if f := out.Leak.Report.Failed(); len(f) == 0 || f[0].Name != "rss" {
		t.Errorf("the leak failed %+v, want rss", f)
	}
	if !out.Clean.Report.Pass || out.CleanCheck.Conclusion != "success" {
		t.Errorf("the clean PR's perfgate / soak: %s %q\n%s", out.CleanCheck.Conclusion, out.CleanCheck.Title, out.CleanCheck.Summary)
	}
}
