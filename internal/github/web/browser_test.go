package web_test

import (
	"context"
	"fmt"
	"image"
	"image/color"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/perfgate/perfgate/internal/browsertest"
	"github.com/perfgate/perfgate/internal/github/history"
)

// The chart colours of static/dashboard.js.
var (
	blue  = color.RGBA{0x1f, 0x6f, 0xeb, 255}
	red   = color.RGBA{0xd1, 0x24, 0x2f, 255}
	green = color.RGBA{0x2d, 0xa4, 0x4e, 255}
)

// TestBrowser drives the dashboard in headless Chromium: one browser for
// every check. Screenshots are checked for what they show (set
// PERFGATE_SCREENSHOTS=dir to keep them).
func TestBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("browser tests are not short")
	}
	f := newFixture(t)
	browser := browsertest.Start(t)
	run := func(t *testing.T) context.Context {
		ctx, cancel := chromedp.NewContext(browser)
		t.Cleanup(cancel)
		ctx, cancelT := context.WithTimeout(ctx, 60*time.Second)
		t.Cleanup(cancelT)
		return ctx
	}
	open := func(t *testing.T, ctx context.Context, path string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(f.srv.URL+path), chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`))); err != nil {
			t.Fatalf("open %s: %v", path, err)
		}
	}
	eval := func(t *testing.T, ctx context.Context, js string, out any) {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[any](js))
		if err != nil {
			t.Fatalf("evaluate %s: %v", js, err)
		}
		switch o := out.(type) {
		case *float64:
			n, ok := v.(float64)
			if !ok {
				t.Fatalf("%s = %v (%T), want a number", js, v, v)
			}
			*o = n
		case *string:
			*o = fmt.Sprint(v)
		}
	}
	rect := func(t *testing.T, ctx context.Context, sel string) image.Rectangle {
		t.Helper()
		var x, y, w, h float64
		for i, p := range []*float64{&x, &y, &w, &h} {
			eval(t, ctx, fmt.Sprintf(`(function(){const r=document.querySelector(%q).getBoundingClientRect();return [r.left+scrollX,r.top+scrollY,r.width,r.height][%d]})()`, sel, i), p)
		}
		return image.Rect(int(x), int(y), int(x+w), int(y+h))
	}
	shot := func(t *testing.T, ctx context.Context, name string) image.Image {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		return browsertest.Screenshot(t, name, png)
	}
	series := "/r/" + repo + "/series?key=nightly/c=1&metric=output_throughput"

	t.Run("series page draws every night, the baseline and the planted change point", func(t *testing.T) {
		ctx := run(t)
		open(t, ctx, series)
		var points, changes, changeX, left float64
		var label string
		eval(t, ctx, `+document.getElementById("chart").dataset.points`, &points)
		eval(t, ctx, `perfgateData.changes.length`, &changes)
		eval(t, ctx, `perfgateData.changes[0].label`, &label)
		if points != days || changes != 1 {
			t.Fatalf("chart draws %v points and %v change points, want %d and 1", points, changes, days)
		}
		if want := history.Commit(repo, stepDay)[:7]; !strings.Contains(label, want) {
			t.Errorf("change point label %q does not name the first bad commit %s", label, want)
		}
		eval(t, ctx, `perfgateChart.valToPos(perfgateData.changes[0].x, "x")`, &changeX)
		eval(t, ctx, `perfgateChart.over.getBoundingClientRect().left + scrollX`, &left)
		img := shot(t, ctx, "series")
		chart := rect(t, ctx, "#chart")
		if n := browsertest.Distinct(img, chart); n < 6 {
			t.Fatalf("the chart region has %d colours: blank?", n)
		}
		if n := browsertest.Count(img, chart, blue, 40); n < days*10 {
			t.Errorf("%d blue pixels in the chart: the %d nightly points are not drawn", n, days)
		}
		if n := browsertest.Count(img, chart, green, 40); n < 50 {
			t.Errorf("%d green pixels: no baseline line", n)
		}
		// The change point is a red dashed line at its night.
		x := int(math.Round(left + changeX))
		column := image.Rect(x-2, chart.Min.Y, x+3, chart.Max.Y)
		if n := browsertest.Count(img, image.Rect(chart.Min.X, chart.Min.Y, x-10, chart.Max.Y), red, 50); n == 0 {
			t.Log("no red left of the change point at all") // the legend's swatch is there: sanity of the colour match
		}
		if n := browsertest.Count(img, column, red, 50); n < 60 {
			t.Errorf("%d red pixels in the column of the change point (x=%d): not marked", n, x)
		}
		plot := rect(t, ctx, "#chart .u-over")
		before := image.Rect(plot.Min.X, plot.Min.Y+20, x-10, plot.Max.Y) // below the marks' labels
		if n := browsertest.Count(img, before, red, 50); n > 40 {
			t.Errorf("%d red pixels before the step: regressions marked where there were none", n)
		}
	})

	t.Run("clicking a point opens its run", func(t *testing.T) {
		ctx := run(t)
		open(t, ctx, series)
		const night = 25
		var px, py, left, top float64
		eval(t, ctx, fmt.Sprintf(`perfgateChart.valToPos(perfgateData.x[%d], "x")`, night), &px)
		eval(t, ctx, fmt.Sprintf(`perfgateChart.valToPos(perfgateData.y[%d], "y")`, night), &py)
		eval(t, ctx, `perfgateChart.over.getBoundingClientRect().left`, &left)
		eval(t, ctx, `perfgateChart.over.getBoundingClientRect().top`, &top)
		x, y := left+px, top+py
		if err := chromedp.Do(ctx, chromedp.MouseEvent(chromedp.MouseMoved, x, y), chromedp.MouseClickXY(x, y),
			chromedp.WaitVisible(chromedp.CSS(`#verdict`))); err != nil {
			t.Fatal(err)
		}
		loc, err := chromedp.Run(ctx, chromedp.Location())
		if err != nil {
			t.Fatal(err)
		}
		if want := "/checks/" + history.Commit(repo, night) + "/nightly"; !strings.Contains(loc, want) {
			t.Errorf("the click opened %s, want the run of night %d (%s)", loc, night, want)
		}
	})

	t.Run("check-run page shows the table and the CDFs", func(t *testing.T) {
		ctx := run(t)
		open(t, ctx, "/r/"+repo+"/checks/"+history.Commit(repo, 25)+"/nightly")
		var rows, cdfs, regressions float64
		eval(t, ctx, `document.querySelectorAll("#verdict tr").length`, &rows)
		eval(t, ctx, `document.querySelectorAll(".cdf[data-drawn='1']").length`, &cdfs)
		eval(t, ctx, `document.querySelectorAll("#verdict tr.bad").length`, &regressions)
		if rows < 10 || regressions < 1 {
			t.Errorf("verdict table: %v rows, %v regressions", rows, regressions)
		}
		if cdfs != 6 {
			t.Errorf("%v CDF charts drawn, want 6 (ttft, tpot, e2el × two cells)", cdfs)
		}
		img := shot(t, ctx, "checkrun")
		cdf := rect(t, ctx, "#cdf-1")
		if b, r := browsertest.Count(img, cdf, blue, 40), browsertest.Count(img, cdf, red, 40); b < 100 || r < 100 {
			t.Errorf("CDF chart: %d blue (base) and %d red (head) pixels; want both curves", b, r)
		}
		table := rect(t, ctx, "#verdict")
		if n := browsertest.Distinct(img, table); n < 4 || table.Dy() < 100 {
			t.Errorf("verdict table region %v has %d colours", table, n)
		}
	})

	t.Run("capacity check page draws the latency–throughput curve with both knees", func(t *testing.T) {
		sha := capacityCheck(t, f)
		ctx := run(t)
		open(t, ctx, "/r/"+repo+"/checks/"+sha+"/capacity")
		var knees, points float64
		var headline, table string
		eval(t, ctx, `document.querySelectorAll("#curve svg line.knee").length`, &knees)
		eval(t, ctx, `document.querySelectorAll("#curve svg circle").length`, &points)
		eval(t, ctx, `document.querySelector("#headline").textContent`, &headline)
		eval(t, ctx, `document.querySelector("#longrun-table").textContent`, &table)
		if knees != 2 || points < 6 {
			t.Errorf("curve: %v knees and %v points, want base's and head's", knees, points)
		}
		if !strings.HasPrefix(headline, "Regression: sustainable rate") || !strings.Contains(table, "| offered req/s |") {
			t.Errorf("capacity verdict %q, table %.80q", headline, table)
		}
		img := shot(t, ctx, "capacity")
		curve := rect(t, ctx, "#curve svg")
		base, head := color.RGBA{0x1f, 0x77, 0xb4, 255}, color.RGBA{0xd6, 0x27, 0x28, 255}
		if b, h := browsertest.Count(img, curve, base, 40), browsertest.Count(img, curve, head, 40); b < 100 || h < 100 || curve.Dx() < 300 {
			t.Errorf("curve %v: %d base-blue and %d head-red pixels; want both curves drawn", curve, b, h)
		}
	})

	t.Run("weekly view", func(t *testing.T) {
		ctx := run(t)
		open(t, ctx, series+"&view=weekly")
		var points, weeks float64
		eval(t, ctx, `+document.getElementById("chart").dataset.points`, &points)
		eval(t, ctx, `document.querySelectorAll("table.grid tr").length - 1 - document.querySelectorAll("#changepoints tr").length`, &weeks)
		if points < 5 || points != weeks {
			t.Errorf("weekly chart has %v points, the table %v weeks", points, weeks)
		}
		img := shot(t, ctx, "weekly")
		chart := rect(t, ctx, "#chart")
		if n := browsertest.Count(img, chart, blue, 40); n < 50 {
			t.Errorf("%d blue pixels: weekly medians not drawn", n)
		}
		// What the legend names is drawn: the baseline (green, dashed),
		// the min–max band (the median's blue at a fifth of its strength
		// over the page) and the weeks with a regressed night (red dots).
		var baselines, regressed float64
		eval(t, ctx, `perfgateData.baseline.filter(function(v){return v!=null}).length`, &baselines)
		eval(t, ctx, `perfgateData.regression.filter(function(v){return v!=null}).length`, &regressed)
		if baselines < points || regressed < 1 {
			t.Errorf("weekly data: %v baselines of %v weeks, %v regressed weeks; the legend names both", baselines, points, regressed)
		}
		if n := browsertest.Count(img, chart, green, 40); n < 50 {
			t.Errorf("%d green pixels: the weekly view does not draw the baseline its legend names", n)
		}
		band := color.RGBA{0xcb, 0xdc, 0xfb, 255} // rgba(31,111,235,0.22) over white
		if n := browsertest.Count(img, chart, band, 14); n < 500 {
			t.Errorf("%d band pixels: the weekly view does not draw the min–max band its legend names", n)
		}
		if n := browsertest.Count(img, rect(t, ctx, "#chart .u-over"), red, 50); n < 40 {
			t.Errorf("%d red pixels: no regressed week marked", n)
		}
	})

	t.Run("overview: grouped events and a sparkline per metric and cell", func(t *testing.T) {
		ctx := run(t)
		open(t, ctx, "/r/"+repo)
		var cards, series, events, marked, links float64
		eval(t, ctx, `document.querySelectorAll(".cards a.card").length`, &cards)
		eval(t, ctx, `document.querySelectorAll(".cards a.card svg.spark polyline").length`, &series)
		eval(t, ctx, `document.querySelectorAll("#events .event").length`, &events)
		eval(t, ctx, `document.querySelectorAll(".cards a.card.regressed line.cp").length`, &marked)
		eval(t, ctx, `document.querySelectorAll("#checks a[href^='https://github.com/`+repo+`/commit/']").length`, &links)
		if cards < 20 || series != cards {
			t.Errorf("%v cards, %v sparklines; want one per metric and cell (two cells × the tier's metrics)", cards, series)
		}
		if events != 1 {
			t.Errorf("%v events for one planted step, want 1 (not a row per change point)", events)
		}
		if marked < 2 || links < 5 {
			t.Errorf("%v change points marked on sparklines, %v commit links in the check runs", marked, links)
		}
		img := shot(t, ctx, "overview")
		if n := browsertest.Count(img, rect(t, ctx, ".card.regressed svg.spark"), blue, 40); n < 40 {
			t.Errorf("%d blue pixels in a sparkline: not drawn", n)
		}
		if n := browsertest.Count(img, rect(t, ctx, "#events .event"), red, 60); n < 20 {
			t.Errorf("%d red pixels on the event: its regression marker is not drawn", n)
		}
	})

	t.Run("dark theme follows the browser", func(t *testing.T) {
		ctx := run(t)
		if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
			t.Fatal(err)
		}
		if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}}); err != nil {
			t.Fatal(err)
		}
		for _, page := range []string{"/r/" + repo, series} {
			open(t, ctx, page)
			var bg string
			eval(t, ctx, `getComputedStyle(document.body).backgroundColor`, &bg)
			if bg != "rgb(13, 17, 23)" {
				t.Errorf("%s: body background %s in the dark scheme, want rgb(13, 17, 23)", page, bg)
			}
		}
		img := shot(t, ctx, "series-dark")
		dark := color.RGBA{13, 17, 23, 255}
		if n := browsertest.Count(img, rect(t, ctx, "#chart"), dark, 6); n < 10000 {
			t.Errorf("%d dark pixels in the chart: it is not drawn on the dark page", n)
		}
	})

	// A phone: 390 CSS pixels wide. No page may be wider than the screen
	// (the issue measured 453–1,120 px); wide tables scroll in their box.
	t.Run("mobile at 390 px", func(t *testing.T) {
		ctx := run(t)
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile)); err != nil {
			t.Fatal(err)
		}
		pages := []struct{ name, path string }{
			{"mobile-index", "/"},
			{"mobile-overview", "/r/" + repo},
			{"mobile-series", series},
			{"mobile-weekly", series + "&view=weekly"},
			{"mobile-checkrun", "/r/" + repo + "/checks/" + history.Commit(repo, 25) + "/nightly"},
		}
		for _, p := range pages {
			open(t, ctx, p.path)
			var width, inner float64
			eval(t, ctx, `document.documentElement.scrollWidth`, &width)
			eval(t, ctx, `window.innerWidth`, &inner)
			if inner != 390 || width > 390 {
				t.Errorf("%s: the page is %v px wide on a %v px screen; want no horizontal scroll", p.path, width, inner)
			}
			img := shot(t, ctx, p.name)
			if b := img.Bounds(); b.Dx() > 2*390 {
				t.Errorf("%s: screenshot %d px wide at scale 2, want ≤ 780", p.path, b.Dx())
			}
		}
		// The overview's cards keep their numbers on one line (a value
		// broken a digit per line is what a too-narrow grid does).
		open(t, ctx, "/r/"+repo)
		var tallest float64
		eval(t, ctx, `Math.max.apply(null, Array.from(document.querySelectorAll(".card .now")).map(function(e){return e.getBoundingClientRect().height}))`, &tallest)
		if tallest > 30 {
			t.Errorf("a card's current value is %v px tall on a phone: wrapped", tallest)
		}
		// The chart is drawn at the phone's width, its points still there.
		open(t, ctx, series)
		var w, points float64
		eval(t, ctx, `perfgateChart.width`, &w)
		eval(t, ctx, `+document.getElementById("chart").dataset.points`, &points)
		if w > 390 || w < 300 || points != days {
			t.Errorf("mobile chart %v px wide with %v points, want 300–390 px and %d", w, points, days)
		}
	})
}
