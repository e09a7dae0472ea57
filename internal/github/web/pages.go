package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/cost"
	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/figure"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

func (h *Handler) parseTemplates() error {
	funcs := template.FuncMap{
		"short":   rev.Short,
		"day":     func(t time.Time) string { return t.UTC().Format("2006-01-02") },
		"when":    func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") },
		"pct":     figure.Change,
		"num":     formatNum,
		"series":  seriesPath,
		"check":   checkRunPath,
		"json":    jsonScript,
		"joinsep": strings.Join,
		"commit":  githubCommit,
		"pr":      githubPR,
		"compare": githubCompare,
		"usd":     cost.USD,
		"assume":  func() string { return cost.Assumption },
		"worse": func(f float64, metric string) bool {
			d := config.HigherIsWorse
			if m, ok := config.SeriesMetric(metric); ok {
				d = m.Natural
			}
			return d.Sign()*f > 0
		},
	}
	h.pages = map[string]*template.Template{}
	for _, page := range []string{"index", "front", "repo", "series", "checkrun", "error"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+page+".html")
		if err != nil {
			return fmt.Errorf("web: template %s: %w", page, err)
		}
		h.pages[page] = t
	}
	return nil
}

// render executes a page into a buffer first, so a template error is a
// clean 500 rather than half a page.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, page string, data any) {
	if m, ok := data.(map[string]any); ok {
		a := Account{Enabled: h.signIn != nil}
		if s := sessionOf(r.Context()); s != nil {
			a.Login = s.login
		}
		m["Account"] = a
		m["Here"] = r.URL.Path
	}
	var buf bytes.Buffer
	if err := h.pages[page].Execute(&buf, data); err != nil {
		h.log.Error().Err(err).Str("page", page).Msg("render dashboard page")
		http.Error(w, "render "+page+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'")
	_, _ = buf.WriteTo(w)
}

// jsonScript embeds v for the page's script (html/template escapes it for
// a <script type="application/json"> element).
func jsonScript(v any) (template.JS, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return template.JS(b), nil //nolint:gosec // json.Marshal escapes <, > and & (HTML-safe), so the script element cannot be closed early
}

func formatNum(f float64) string {
	switch a := abs(f); {
	case a == 0:
		return "0"
	case a >= 1000:
		return strconv.FormatFloat(f, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(f, 'f', 1, 64)
	case a >= 0.01:
		return strconv.FormatFloat(f, 'f', 3, 64)
	default:
		return strconv.FormatFloat(f, 'g', 3, 64)
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

func (h *Handler) index(w http.ResponseWriter, r *http.Request) {
	repos, err := h.st.ListRepos(r.Context())
	if err != nil {
		h.internal(w, r, err)
		return
	}
	// Private repositories the visitor holds no grant for are left out
	// without a word: even their number is not the visitor's to know.
	var visible []string
	for _, repo := range repos {
		if h.allowed(w, r, repo) {
			visible = append(visible, repo)
		}
	}
	if sessionOf(r.Context()) != nil {
		h.frontPage(w, r, visible)
		return
	}
	h.render(w, r, "index", map[string]any{"Title": "perfgate", "Repos": visible})
}

// checkRow is a check run on the repository page, with its stored verdict
// document (nil before it is judged).
type checkRow struct {
	store.CheckRun
	Report *gate.Report
}

// benchmark is one tier × matrix cell of a repository and its cards.
type benchmark struct {
	Key, Tier, Cell string
	Cards           []*Card
}

func (h *Handler) repoPage(w http.ResponseWriter, r *http.Request, repo string) {
	ctx := r.Context()
	series, err := h.st.ListSeries(ctx, repo)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	open, err := h.st.ListChangePoints(ctx, store.ChangePointFilter{Repo: repo, State: store.ChangePointOpen})
	if err != nil {
		h.internal(w, r, err)
		return
	}
	cards, err := h.overview(ctx, repo, series, open)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	var benches []*benchmark
	byKey := map[string]*benchmark{}
	for _, c := range cards {
		b := byKey[c.Key]
		if b == nil {
			b = &benchmark{Key: c.Key, Tier: c.Tier, Cell: c.Cell}
			byKey[c.Key] = b
			benches = append(benches, b)
		}
		b.Cards = append(b.Cards, c)
	}
	sort.SliceStable(benches, func(i, j int) bool { return benches[i].Key < benches[j].Key })
	for _, b := range benches {
		// What moved first: open regressions, then the largest weekly change.
		sort.SliceStable(b.Cards, func(i, j int) bool {
			ci, cj := b.Cards[i], b.Cards[j]
			if (ci.Regressions > 0) != (cj.Regressions > 0) {
				return ci.Regressions > 0
			}
			return ci.Metric < cj.Metric
		})
	}
	// The latest of each tier: a month of nightlies must not hide the PRs.
	// Each row tells its stored verdict document's verdict and headline.
	var checks []checkRow
	for _, tier := range []string{"quick", "merge", "nightly", "capacity", "soak"} {
		crs, err := h.st.RepoCheckRuns(ctx, store.CheckRunFilter{Repo: repo, Tier: tier, Limit: 10})
		if err != nil {
			h.internal(w, r, err)
			return
		}
		for _, cr := range crs {
			checks = append(checks, checkRow{CheckRun: cr, Report: storedReport(cr.Verdict)})
		}
	}
	usage, err := h.usageOf(ctx, repo, usageWeeks)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	openCost, err := h.openCost(ctx, repo)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	h.render(w, r, "repo", map[string]any{"Title": repo, "Repo": repo, "Benchmarks": benches, "Events": events(open), "Checks": checks, "Usage": usage,
		"OpenCost": openCost, "CostAssumption": cost.Assumption})
}

// chartData is what static/dashboard.js draws: uPlot's aligned columns
// plus the marks.
type chartData struct {
	Metric     string     `json:"metric"`
	Unit       string     `json:"unit"`
	X          []int64    `json:"x"` // unix seconds
	Y          []float64  `json:"y"`
	Baseline   []*float64 `json:"baseline"`
	Regression []*float64 `json:"regression"` // the value where regressed, else null
	Low        []*float64 `json:"low,omitempty"`
	High       []*float64 `json:"high,omitempty"`
	Links      []string   `json:"links"`
	Labels     []string   `json:"labels"`
	Changes    []mark     `json:"changes"`
	Releases   []mark     `json:"releases"`
}

type mark struct {
	X          int64  `json:"x"`
	Label      string `json:"label"`
	Regression bool   `json:"regression,omitempty"`
}

func (h *Handler) seriesPage(w http.ResponseWriter, r *http.Request, repo string) {
	key, metric := r.URL.Query().Get("key"), r.URL.Query().Get("metric")
	if key == "" || metric == "" {
		h.fail(w, r, http.StatusBadRequest, "A series needs ?key= (a benchmark such as nightly/c=1) and ?metric= (such as tpot_p99); pick one on the repository's page.")
		return
	}
	rng, err := rangeParams(r, h.now())
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	s, err := h.loadSeries(r.Context(), repo, key, metric, rng.Since)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	s.Points = rng.cut(s.Points)
	if len(s.Points) == 0 {
		h.fail(w, r, http.StatusNotFound, fmt.Sprintf("%s has no %s points for %s%s.", repo, metric, key, rng.words()))
		return
	}
	all, err := h.st.ListSeries(r.Context(), repo)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	sw := newSwitcher(all, key, metric)
	weekly := r.URL.Query().Get("view") == "weekly"
	d := chartData{Metric: metric, Unit: s.Unit}
	var weeks []Week
	if weekly {
		// The weekly view draws what its legend names: the weekly median
		// with its min–max band, the baseline in force at the week's end,
		// and the weeks in which a night regressed.
		weeks = Weekly(s.Points)
		for _, wk := range weeks {
			lo, hi := wk.Min, wk.Max
			d.X = append(d.X, wk.Start.Unix())
			d.Y = append(d.Y, wk.Median)
			d.Low, d.High = append(d.Low, &lo), append(d.High, &hi)
			d.Baseline = append(d.Baseline, wk.Baseline)
			var reg *float64
			if wk.Regressed > 0 {
				v := wk.Median
				reg = &v
			}
			d.Regression = append(d.Regression, reg)
			d.Links = append(d.Links, "")
			d.Labels = append(d.Labels, fmt.Sprintf("%s: median of %d", wk.Label, wk.N))
		}
	} else {
		for _, p := range s.Points {
			d.X = append(d.X, p.Date.Unix())
			d.Y = append(d.Y, p.Value)
			d.Baseline = append(d.Baseline, p.Baseline)
			var reg *float64
			if p.Regression {
				v := p.Value
				reg = &v
			}
			d.Regression = append(d.Regression, reg)
			d.Links = append(d.Links, p.URL)
			d.Labels = append(d.Labels, p.Date.Format("2006-01-02")+" "+rev.Short(p.Commit))
		}
	}
	for _, c := range s.ChangePoints {
		if c.State != store.ChangePointOpen {
			continue
		}
		d.Changes = append(d.Changes, mark{X: c.Date.Unix(), Label: fmt.Sprintf("%s %s", pctString(c.Change), rev.Short(c.BadCommit)), Regression: c.Regression})
	}
	for _, rel := range s.Releases {
		d.Releases = append(d.Releases, mark{X: rel.Date.Unix(), Label: rel.Tag})
	}
	q := r.URL.Query()
	q.Del(AccessParam)
	h.render(w, r, "series", map[string]any{"Title": metric + " · " + key + " · " + repo, "Repo": repo, "S": s, "Chart": d,
		"Weekly": weekly, "Weeks": weeks, "Switch": sw, "Range": rng,
		"Daily":      rng.link(seriesPath(repo, key, metric, "")),
		"WeeklyLink": rng.link(seriesPath(repo, key, metric, "weekly")),
		"CSV":        "/api/data/repos/" + repo + "/series/points?" + q.Encode() + "&format=csv"})
}

// switcher is the series page's metric and cell pickers.
type switcher struct {
	Key, Metric string
	Keys        []string
	Metrics     []string // of Key
}

func newSwitcher(all []store.SeriesInfo, key, metric string) switcher {
	sw := switcher{Key: key, Metric: metric}
	seen := map[string]bool{}
	for _, si := range all {
		if !seen[si.Key] {
			seen[si.Key] = true
			sw.Keys = append(sw.Keys, si.Key)
		}
		if si.Key == key {
			sw.Metrics = append(sw.Metrics, si.Metric)
		}
	}
	return sw
}

// dateRange is the series page's window: from Since (zero: the first
// night) to Until (zero: the last), or the last Days.
type dateRange struct {
	Since, Until time.Time
	Days         int
}

func (d dateRange) cut(pts []Point) []Point {
	if d.Until.IsZero() {
		return pts
	}
	var out []Point
	for _, p := range pts {
		if p.Date.Before(d.Until.Add(24 * time.Hour)) {
			out = append(out, p)
		}
	}
	return out
}

func (d dateRange) words() string {
	switch {
	case d.Days > 0:
		return fmt.Sprintf(" in the last %d days", d.Days)
	case !d.Since.IsZero() || !d.Until.IsZero():
		return " in that date range"
	}
	return ""
}

// SinceText and UntilText fill the form's date inputs.
func (d dateRange) SinceText() string { return dayText(d.Since) }
func (d dateRange) UntilText() string { return dayText(d.Until) }

func dayText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02")
}

// link keeps the range on a link to another view of the series.
func (d dateRange) link(u string) string {
	switch {
	case d.Days > 0:
		return u + fmt.Sprintf("&days=%d", d.Days)
	case !d.Since.IsZero() || !d.Until.IsZero():
		if !d.Since.IsZero() {
			u += "&since=" + dayText(d.Since)
		}
		if !d.Until.IsZero() {
			u += "&until=" + dayText(d.Until)
		}
	}
	return u
}

// rangeParams reads ?days=N, or ?since= and ?until= (YYYY-MM-DD, either
// may be empty); none means all history.
func rangeParams(r *http.Request, now time.Time) (dateRange, error) {
	q := r.URL.Query()
	var d dateRange
	if v := q.Get("days"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return d, fmt.Errorf("days=%q: want a positive number of days", v)
		}
		d.Days, d.Since = n, now.UTC().Truncate(24*time.Hour).AddDate(0, 0, -n)
		return d, nil
	}
	for _, p := range []struct {
		name string
		to   *time.Time
	}{{"since", &d.Since}, {"until", &d.Until}} {
		if v := q.Get(p.name); v != "" {
			t, err := time.Parse("2006-01-02", v)
			if err != nil {
				return d, fmt.Errorf("%s=%q: want a date such as 2025-01-31", p.name, v)
			}
			*p.to = t
		}
	}
	if !d.Since.IsZero() && !d.Until.IsZero() && d.Until.Before(d.Since) {
		return d, fmt.Errorf("until=%s is before since=%s: pick an end after the start", dayText(d.Until), dayText(d.Since))
	}
	return d, nil
}

func pctString(f float64) string { return figure.Change(f) }

func (h *Handler) jobLog(w http.ResponseWriter, r *http.Request, repo string) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, "job id must be a number")
		return
	}
	job, err := h.st.GetJob(r.Context(), id)
	if err != nil || job.Repo != repo {
		h.fail(w, r, http.StatusNotFound, fmt.Sprintf("%s has no job %d.", repo, id))
		return
	}
	attempt, _ := strconv.Atoi(r.URL.Query().Get("attempt"))
	log, err := h.st.ReadLog(r.Context(), id, attempt)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write(log)
}
