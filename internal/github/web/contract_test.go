package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/analysis/gate/gatetest"
	"github.com/perfgate/perfgate/internal/analysis/report"
	"github.com/perfgate/perfgate/internal/browsertest"
	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/github/web"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/figure"
)

// TestOneDecisionOneTelling is the contract between the verdict document
// and every surface that shows it: for each rule that can decide (the gate
// makes each document from runs; none is written by hand), the check run's
// summary, the PR comment, the check page and `perfgate compare`'s text
// print the same headline and, per metric, the same values, change,
// threshold, interval at the same level, noise band and verdict. A surface
// that computed a number of its own would print another and fail here. It
// also holds the document to its own promises: no row reads backwards, no
// pass headline above a row that cannot rule out its threshold unless the
// headline says so, "~" only where the interval holds no change.
func TestOneDecisionOneTelling(t *testing.T) {
	cases, err := gatetest.Cases()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, srv := contractSite(t)

	shas := map[string]string{}
	for i, c := range cases {
		shas[c.Name] = fmt.Sprintf("%040x", i+1)
		t.Run(c.Name, func(t *testing.T) {
			rep := c.Report
			sha := shas[c.Name]
			doc, err := json.Marshal(map[string]any{"report": rep})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.PutCheckRun(ctx, store.CheckRun{Repo: "acme/contract", HeadSHA: sha, Tier: rep.Tier, State: "completed", Verdict: doc}); err != nil {
				t.Fatal(err)
			}
			code, page, _ := get(t, nil, srv.URL+"/r/acme/contract/checks/"+sha+"/"+rep.Tier)
			if code != 200 {
				t.Fatalf("check page: %d\n%.400s", code, page)
			}
			v := report.FromGate(report.View{Verdict: report.VerdictOf(rep.Verdict), SHA: sha, Author: "octocat",
				Deadline: time.Date(2026, 12, 9, 9, 0, 0, 0, time.UTC), EscalateAfter: 48 * time.Hour}, rep, nil)
			check, err := report.RenderCheck(v)
			if err != nil {
				t.Fatal(err)
			}
			comment, err := report.RenderComment(v)
			if err != nil {
				t.Fatal(err)
			}
			var cli strings.Builder
			if err := rep.WriteText(&cli); err != nil {
				t.Fatal(err)
			}

			// One headline.
			if rep.Headline == "" {
				t.Fatal("the document has no headline")
			}
			for surface, text := range map[string]string{"check page": html.UnescapeString(page), "check run": check.Summary, "compare": cli.String()} {
				if !strings.Contains(text, rep.Headline) {
					t.Errorf("%s lacks the headline %q", surface, rep.Headline)
				}
			}
			if rep.Verdict == gate.Regression && !strings.Contains(comment, rep.Headline) {
				t.Errorf("comment lacks the headline %q", rep.Headline)
			}

			pageRows := tableRows(page)
			for _, m := range rep.Metrics {
				want := map[string]string{"baseline": m.ValueText(m.Baseline), "this commit": m.ValueText(m.Candidate), "change": m.DeltaText(),
					"threshold": m.ThresholdText(), "interval": m.IntervalText(), "noise band": m.BandText(), "verdict": m.VerdictText()}
				row, ok := pageRows[m.Metric]
				if !ok {
					t.Errorf("check page has no row for %s", m.Metric)
					continue
				}
				for col, w := range want {
					if row[col] != w {
						t.Errorf("%s: the check page's %s is %q, the document's %q", m.Metric, col, row[col], w)
					}
				}
				// The check run and the comment print the same cells, in
				// the author's table (value columns) and the details.
				author := []string{m.Name(), want["baseline"], want["this commit"], want["change"], want["threshold"], ""}
				details := []string{m.Name(), want["change"], want["interval"], want["noise band"], m.DetectableText(), "", ""}
				for surface, text := range map[string]string{"check run": check.Summary, "comment": comment} {
					if surface == "comment" && rep.Verdict != gate.Regression {
						continue // a comment is posted for a regression only
					}
					shown := 0
					for _, cells := range mdRows(text, m.Name()) {
						shown++
						wantCells := author
						if len(cells) == len(details) {
							wantCells = details
						}
						for k, w := range wantCells {
							if w != "" && (k >= len(cells) || cells[k] != w) {
								t.Errorf("%s: the %s's row %q has %q where the document says %q", m.Metric, surface, strings.Join(cells, " | "), cellAt(cells, k), w)
							}
						}
					}
					if shown == 0 && !m.Secondary {
						t.Errorf("%s: the %s shows no row for it", m.Metric, surface)
					}
				}
				for _, cell := range []string{want["baseline"], want["this commit"], want["change"], want["threshold"], want["interval"], want["noise band"], m.DetectableText()} {
					if !lineHas(cli.String(), m.Name(), cell) {
						t.Errorf("%s: compare's row lacks %q", m.Metric, cell)
					}
				}
				promises(t, rep, m)
			}
		})
	}
	// The dashboard's rows print the stored documents: the front page's
	// week of verdicts and the repository page's check runs.
	t.Run("dashboard", func(t *testing.T) {
		b := newBrowser(t)
		b.signIn(srv.URL, "/")
		for _, path := range dashboardPages {
			code, page, _ := get(t, b.c, srv.URL+path)
			if code != 200 {
				t.Fatalf("%s: %d\n%.400s", path, code, page)
			}
			dashboardAgrees(t, path, dashboardRows(page), cases, shas)
		}
	})
}

// TestOneDecisionOneTellingInChromium reads the check page the way a
// person sees it: headless Chromium renders each rule's document, and the
// headline and every cell of the verdict table, as the browser shows them,
// are the document's.
func TestOneDecisionOneTellingInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("browser tests are not short")
	}
	cases, err := gatetest.Cases()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, srv := contractSite(t)
	browser := browsertest.Start(t)
	shas := map[string]string{}
	for i, c := range cases {
		rep := c.Report
		sha := fmt.Sprintf("%040x", i+1)
		shas[c.Name] = sha
		doc, err := json.Marshal(map[string]any{"report": rep})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.PutCheckRun(ctx, store.CheckRun{Repo: "acme/contract", HeadSHA: sha, Tier: rep.Tier, State: "completed", Verdict: doc}); err != nil {
			t.Fatal(err)
		}
		bctx, cancel := chromedp.NewContext(browser)
		bctx, cancelT := context.WithTimeout(bctx, 60*time.Second)
		err = chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/r/acme/contract/checks/"+sha+"/"+rep.Tier),
			chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`)))
		var headline string
		var cells [][]string
		if err == nil {
			headline, err = chromedp.Run(bctx, chromedp.Text(chromedp.CSS("#headline")))
		}
		if err == nil {
			cells, err = chromedp.Run(bctx, chromedp.Evaluate[[][]string](`[...document.querySelectorAll("#verdict tr[data-metric]")].map(r => [r.dataset.metric, ...[...r.cells].map(c => c.innerText.trim())])`))
		}
		cancelT()
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if strings.TrimSpace(headline) != rep.Headline {
			t.Errorf("%s: Chromium shows the headline %q, the document says %q", c.Name, headline, rep.Headline)
		}
		byMetric := map[string][]string{}
		for _, row := range cells {
			byMetric[row[0]] = row[1:]
		}
		for _, m := range rep.Metrics {
			row := byMetric[m.Metric]
			want := []string{m.Name(), m.ValueText(m.Baseline), m.ValueText(m.Candidate), m.DeltaText(), m.ThresholdText(), m.IntervalText(), m.BandText(), m.DetectableText(), m.VerdictText()}
			for k, w := range want {
				if k >= len(row) || (k > 0 && row[k] != w) || (k == 0 && !strings.HasPrefix(row[0], w)) {
					t.Errorf("%s %s: Chromium shows %q, the document says %q", c.Name, m.Metric, row, want)
					break
				}
			}
		}
	}
	// The dashboard's rows, as a signed-in person sees them.
	bctx, cancel := chromedp.NewContext(browser)
	defer cancel()
	bctx, cancelT := context.WithTimeout(bctx, 90*time.Second)
	defer cancelT()
	ready := chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`))
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/login?next=/"), ready); err != nil {
		t.Fatalf("sign in: %v", err)
	}
	for _, path := range dashboardPages {
		var cells [][]string
		err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+path), ready)
		if err == nil {
			cells, err = chromedp.Run(bctx, chromedp.Evaluate[[][]string](`[...document.querySelectorAll("tr[data-check]")].map(r => [r.dataset.check, r.querySelector(".verdict").innerText.trim(), r.querySelector(".headline").innerText.trim()])`))
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		rows := map[string]dashboardRow{}
		for _, r := range cells {
			rows[r[0]] = dashboardRow{verdict: r[1], headline: r[2]}
		}
		dashboardAgrees(t, path, rows, cases, shas)
	}
}

// contractSite is the pages over an empty store, for documents the test
// puts there, with people signing in through a fake GitHub (the front
// page is a signed-in person's).
func contractSite(t *testing.T) (store.Store, *httptest.Server) {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "perfgate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	// The front page lists the repositories the store knows by their jobs
	// and series: one night of a series makes acme/contract one.
	if err := st.PutTrend(context.Background(), store.TrendPoint{Repo: "acme/contract", Key: "nightly", Metric: "tpot_median",
		Date: time.Now().UTC().Truncate(24 * time.Hour), Value: 17.6}); err != nil {
		t.Fatal(err)
	}
	gh := ghtest.New(t)
	gh.SignInAs("octocat")
	srv := httptest.NewUnstartedServer(nil)
	h, err := web.New(web.Options{Store: st, Visibility: web.StaticVisibility{"acme/contract": true}, Signer: web.NewSigner([]byte("k"), time.Hour, nil),
		PublicURL: "http://" + srv.Listener.Addr().String(), Log: zerolog.Nop(),
		SignIn: &web.SignIn{ClientID: githubtest.ClientID, ClientSecret: githubtest.ClientSecret, WebURL: gh.URL, APIURL: gh.URL + "/"}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = h
	srv.Start()
	t.Cleanup(srv.Close)
	return st, srv
}

// dashboardPages are the pages whose rows tell stored verdicts: the
// signed-in front page's week of verdicts and the repository page's
// recent check runs.
var dashboardPages = []string{"/", "/r/acme/contract"}

// dashboardRow is one stored verdict's row on a dashboard page: its
// verdict and headline cells.
type dashboardRow struct{ verdict, headline string }

var (
	checkRowRE = regexp.MustCompile(`(?s)<tr data-check="([^"]+)">(.*?)</tr>`)
	verdictRE  = regexp.MustCompile(`(?s)<td class="(?:[^"]* )?verdict">(.*?)</td>`)
	headlineRE = regexp.MustCompile(`(?s)<td class="headline">(.*?)</td>`)
)

// dashboardRows reads a dashboard page's verdict rows: repo/sha/tier → row.
func dashboardRows(page string) map[string]dashboardRow {
	text := func(re *regexp.Regexp, s string) string {
		m := re.FindStringSubmatch(s)
		if m == nil {
			return "(none)"
		}
		return strings.TrimSpace(html.UnescapeString(tagRE.ReplaceAllString(m[1], "")))
	}
	out := map[string]dashboardRow{}
	for _, r := range checkRowRE.FindAllStringSubmatch(page, -1) {
		out[html.UnescapeString(r[1])] = dashboardRow{verdict: text(verdictRE, r[2]), headline: text(headlineRE, r[2])}
	}
	return out
}

// dashboardAgrees compares each case's dashboard row with its document.
func dashboardAgrees(t *testing.T, page string, rows map[string]dashboardRow, cases []gatetest.Case, shas map[string]string) {
	t.Helper()
	for _, c := range cases {
		key := "acme/contract/" + shas[c.Name] + "/" + c.Report.Tier
		row, ok := rows[key]
		if !ok {
			t.Errorf("%s: %s has no row for %s", c.Name, page, key)
			continue
		}
		if row.verdict != string(c.Report.Verdict) || row.headline != c.Report.Headline {
			t.Errorf("%s: %s's row says %s %q, the document %s %q", c.Name, page, row.verdict, row.headline, c.Report.Verdict, c.Report.Headline)
		}
	}
}

// promises checks one row against the document's own rules.
func promises(t *testing.T, rep *gate.Report, m gate.MetricResult) {
	t.Helper()
	if m.Rule == gate.RuleCannotTell && !m.Secondary && (rep.Verdict != gate.Inconclusive || !strings.Contains(rep.Headline, m.Note)) {
		t.Errorf("%s cannot tell (%s), yet the verdict is %s: %q", m.Metric, m.Note, rep.Verdict, rep.Headline)
	}
	if !m.Measured() {
		return
	}
	if longRunRule(m.Rule) {
		longRunPromises(t, rep, m)
		return
	}
	if (m.Candidate-m.Baseline)*m.Estimate < 0 || strings.HasPrefix(m.DeltaText(), "+") != (m.Candidate > m.Baseline) && m.DeltaText() != "0.0%" {
		t.Errorf("%s reads backwards: %s → %s, Δ %s", m.Metric, m.ValueText(m.Baseline), m.ValueText(m.Candidate), m.DeltaText())
	}
	holdsZero := m.CILow <= 0 && m.CIHigh >= 0
	if (m.Verdict == gate.MetricSame) != (holdsZero && (m.Rule == gate.RuleEquivalence || m.Rule == gate.RuleLastLook)) {
		t.Errorf("%s: verdict %q beside the interval %s", m.Metric, m.Verdict, m.IntervalText())
	}
	if m.Verdict == gate.MetricRegression && holdsZero {
		t.Errorf("%s: a regression whose interval %s holds no change", m.Metric, m.IntervalText())
	}
	if rep.Verdict == gate.Pass && !m.Secondary && strings.HasPrefix(m.Equivalence(), "cannot rule out") {
		if m.Rule != gate.RuleLastLook || !strings.Contains(rep.Headline, "last look") || !strings.Contains(rep.Headline, "not ruled out") {
			t.Errorf("%s cannot rule out its threshold under the pass headline %q", m.Metric, rep.Headline)
		}
	}
	if rep.Verdict == gate.Pass && strings.Contains(rep.Headline, "shown to be within") && m.Rule == gate.RuleLastLook {
		t.Errorf("%s passed by the last look under %q", m.Metric, rep.Headline)
	}
	if lvl := figure.Level(m.Level); !strings.HasSuffix(m.IntervalText(), " at "+lvl) {
		t.Errorf("%s: interval %s is not stated at the level used, %s", m.Metric, m.IntervalText(), lvl)
	}
}

// longRunRule reports whether a row was decided by a long run's rule (a
// capacity knee, a soak trend), which states no interval at a level.
func longRunRule(rule string) bool {
	switch rule {
	case gate.RuleCapacity, gate.RuleSoak, gate.RuleCannotTell, gate.RuleRecorded:
		return true
	}
	return false
}

// longRunPromises holds a long run's row to its rules: the values read the
// way the change does, a worse knee or trend is never an improvement or a
// pass past its limit, and the headline names every regressed row.
func longRunPromises(t *testing.T, rep *gate.Report, m gate.MetricResult) {
	t.Helper()
	worse := m.Direction.Sign() * m.Estimate // > 0: worse
	if m.Rule != gate.RuleRecorded {
		if (m.Candidate-m.Baseline)*m.Estimate < 0 || strings.HasPrefix(m.DeltaText(), "+") != (m.Candidate > m.Baseline) && m.Estimate != 0 {
			t.Errorf("%s reads backwards: %s → %s, Δ %s", m.Metric, m.ValueText(m.Baseline), m.ValueText(m.Candidate), m.DeltaText())
		}
	}
	switch m.Verdict {
	case gate.MetricImprovement:
		if worse >= 0 {
			t.Errorf("%s: a change of %s the worse way called an improvement", m.Metric, m.DeltaText())
		}
	case gate.MetricRegression:
		if worse <= m.Threshold {
			t.Errorf("%s: %s is not past its threshold %s, yet a regression", m.Metric, m.DeltaText(), m.ThresholdText())
		}
		if !strings.Contains(rep.Headline, m.Name()+" ") || !strings.Contains(rep.Headline, m.DeltaText()) || rep.Verdict != gate.Regression {
			t.Errorf("%s regressed by %s under the %s headline %q", m.Metric, m.DeltaText(), rep.Verdict, rep.Headline)
		}
	case gate.MetricPass:
		if m.Rule == gate.RuleCapacity && -worse >= m.Threshold || m.Rule == gate.RuleSoak && worse > m.Threshold && !m.Secondary && !strings.Contains(m.RuleText(), "noise floor") {
			t.Errorf("%s: %s past its threshold %s, yet a pass", m.Metric, m.DeltaText(), m.ThresholdText())
		}
	}
	if rep.Verdict == gate.Pass && !m.Secondary && m.Verdict != gate.MetricPass && m.Verdict != gate.MetricImprovement {
		t.Errorf("%s is %s under the pass headline %q", m.Metric, m.Verdict, rep.Headline)
	}
}

var (
	rowRE  = regexp.MustCompile(`(?s)<tr[^>]*data-metric="([^"]+)"[^>]*>(.*?)</tr>`)
	cellRE = regexp.MustCompile(`(?s)<td[^>]*>(.*?)</td>`)
	tagRE  = regexp.MustCompile(`<[^>]+>`)
)

// tableRows reads the check page's verdict table: metric → column → text.
func tableRows(page string) map[string]map[string]string {
	cols := []string{"metric", "baseline", "this commit", "change", "threshold", "interval", "noise band", "detectable", "verdict", "decided by"}
	out := map[string]map[string]string{}
	for _, r := range rowRE.FindAllStringSubmatch(page, -1) {
		row := map[string]string{}
		for i, c := range cellRE.FindAllStringSubmatch(r[2], -1) {
			if i < len(cols) {
				row[cols[i]] = strings.TrimSpace(html.UnescapeString(tagRE.ReplaceAllString(c[1], "")))
			}
		}
		out[html.UnescapeString(r[1])] = row
	}
	return out
}

// mdRows are the cells of the markdown table rows whose first cell is name.
func mdRows(text, name string) [][]string {
	var out [][]string
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, "| ") {
			continue
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(l, "|"), " | ") {
			cells = append(cells, strings.TrimSpace(c))
		}
		if len(cells) > 0 && cells[0] == name {
			out = append(out, cells)
		}
	}
	return out
}

func cellAt(cells []string, k int) string {
	if k < len(cells) {
		return cells[k]
	}
	return ""
}

// lineHas reports whether some line of text that contains key contains
// cell too.
func lineHas(text, key, cell string) bool {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, key) && strings.Contains(l, cell) {
			return true
		}
	}
	return false
}
