package web

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/config"
)

// Series is one metric of one benchmark on the default branch, with what
// the dashboard marks on it. It is also the API's answer.
type Series struct {
	Repo      string  `json:"repo"`
	Key       string  `json:"key"` // "nightly/c=1"
	Tier      string  `json:"tier"`
	Cell      string  `json:"cell,omitempty"`
	Metric    string  `json:"metric"`
	Unit      string  `json:"unit"`
	Direction string  `json:"direction"` // higher_is_worse | lower_is_worse
	Points    []Point `json:"points"`
	// Baselines are the promoted levels, each from its promotion on.
	Baselines    []Level       `json:"baselines"`
	ChangePoints []ChangeMark  `json:"change_points"`
	Releases     []ReleaseMark `json:"releases"`
}

// Point is one measurement.
type Point struct {
	Date       time.Time `json:"date"`
	Value      float64   `json:"value"`
	Commit     string    `json:"commit,omitempty"`
	JobID      int64     `json:"job_id"`
	Baseline   *float64  `json:"baseline,omitempty"` // the level in force that day
	Regression bool      `json:"regression"`         // its check run called this metric a regression
	URL        string    `json:"url,omitempty"`      // its check run's page
}

// Level is a baseline version's median of the metric.
type Level struct {
	Version int       `json:"version"`
	From    time.Time `json:"from"`
	Value   float64   `json:"value"`
	Commit  string    `json:"commit,omitempty"`
}

// ChangeMark is a change point on the series.
type ChangeMark struct {
	ID         int64     `json:"id"`
	Date       time.Time `json:"date"`
	GoodCommit string    `json:"good_commit,omitempty"`
	BadCommit  string    `json:"bad_commit,omitempty"`
	Change     float64   `json:"change"`
	PValue     float64   `json:"p_value"`
	Regression bool      `json:"regression"`
	State      string    `json:"state"`
	IssueURL   string    `json:"issue_url,omitempty"`
}

// ReleaseMark is a published release.
type ReleaseMark struct {
	Date   time.Time `json:"date"`
	Tag    string    `json:"tag"`
	Commit string    `json:"commit,omitempty"`
}

// splitKey turns a trend key into its tier and matrix cell.
func splitKey(key string) (tier, cell string) {
	tier, cell, _ = strings.Cut(key, "/")
	return tier, cell
}

// loadSeries assembles one series from the store.
func (h *Handler) loadSeries(ctx context.Context, repo, key, metric string, since time.Time) (*Series, error) {
	tier, cell := splitKey(key)
	s := &Series{Repo: repo, Key: key, Tier: tier, Cell: cell, Metric: metric, Direction: string(config.HigherIsWorse)}
	if m, ok := config.SeriesMetric(metric); ok {
		s.Unit, s.Direction = m.Unit, string(m.Natural)
	}
	pts, err := h.st.SeriesPoints(ctx, repo, key, metric, since)
	if err != nil {
		return nil, err
	}
	regressed, err := h.regressedCommits(ctx, repo, tier, cell, metric)
	if err != nil {
		return nil, err
	}
	levels, err := h.baselineLevels(ctx, repo, key, metric)
	if err != nil {
		return nil, err
	}
	// A baseline promoted from a measured commit of this series is the
	// level from that night on, whenever the promotion was recorded.
	night := map[string]time.Time{}
	for _, p := range pts {
		if p.HeadSHA != "" {
			night[p.HeadSHA] = p.Date
		}
	}
	for i := range levels {
		if d, ok := night[levels[i].Commit]; ok && d.Before(levels[i].From) {
			levels[i].From = d
		}
	}
	sort.SliceStable(levels, func(i, j int) bool { return levels[i].From.Before(levels[j].From) })
	s.Baselines = levels
	s.Points = make([]Point, len(pts))
	li := -1
	for i, p := range pts {
		pt := Point{Date: p.Date, Value: p.Value, Commit: p.HeadSHA, JobID: p.JobID, Regression: regressed[p.HeadSHA]}
		if p.HeadSHA != "" {
			t := p.Tier
			if t == "" {
				t = tier
			}
			pt.URL = checkRunPath(repo, p.HeadSHA, t)
		}
		for li+1 < len(levels) && levels[li+1].From.Before(p.Date.Add(24*time.Hour)) {
			li++
		}
		if li >= 0 {
			v := levels[li].Value
			pt.Baseline = &v
		}
		s.Points[i] = pt
	}
	cps, err := h.st.ListChangePoints(ctx, store.ChangePointFilter{Repo: repo, Key: key, Metric: metric})
	if err != nil {
		return nil, err
	}
	for _, c := range cps {
		s.ChangePoints = append(s.ChangePoints, ChangeMark{ID: c.ID, Date: c.Day, GoodCommit: c.GoodSHA, BadCommit: c.BadSHA,
			Change: c.Change, PValue: c.PValue, Regression: c.Regression, State: c.State, IssueURL: c.IssueURL})
	}
	s.Releases, err = h.releases(ctx, repo, pts)
	return s, err
}

// regressedCommits are the commits whose check run on this tier called
// the metric (in this cell) a regression.
func (h *Handler) regressedCommits(ctx context.Context, repo, tier, cell, metric string) (map[string]bool, error) {
	crs, err := h.st.RepoCheckRuns(ctx, store.CheckRunFilter{Repo: repo, Tier: tier,
		States: []string{store.CheckWarned, store.CheckEscalated, store.CheckAccepted}})
	if err != nil {
		return nil, err
	}
	name := metric
	if cell != "" {
		name = cell + " " + metric // how the matrix judge labels a cell's rows
	}
	out := map[string]bool{}
	for _, cr := range crs {
		rep := storedReport(cr.Verdict)
		if rep == nil {
			continue
		}
		for _, m := range rep.Metrics {
			if m.Metric == name && m.Verdict == gate.MetricRegression {
				out[cr.HeadSHA] = true
			}
		}
	}
	return out, nil
}

// baselineLevels are the key's baseline versions, oldest first, each with
// the median of its runs for the metric.
func (h *Handler) baselineLevels(ctx context.Context, repo, key, metric string) ([]Level, error) {
	hist, err := h.st.BaselineHistory(ctx, repo, key)
	if err != nil {
		return nil, err
	}
	var out []Level
	for i := len(hist) - 1; i >= 0; i-- {
		b := hist[i]
		meds := h.levels.get(b)
		if v, ok := meds[metric]; ok {
			out = append(out, Level{Version: b.Version, From: b.CreatedAt, Value: v, Commit: b.Commit})
		}
	}
	return out, nil
}

func (c *baselineCache) get(b store.Baseline) map[string]float64 {
	c.mu.Lock()
	m, ok := c.m[b.ID]
	c.mu.Unlock()
	if ok {
		return m
	}
	m = map[string]float64{}
	if runs, err := gate.ParseRuns(b.Runs); err == nil {
		for _, name := range metricNames {
			if v, ok := gate.MedianOf(runs, name); ok {
				m[name] = v
			}
		}
	}
	c.mu.Lock()
	if len(c.m) > 10000 {
		c.m = map[int64]map[string]float64{}
	}
	c.m[b.ID] = m
	c.mu.Unlock()
	return m
}

// metricNames are the metrics a baseline's levels are computed for.
var metricNames = func() []string {
	names := []string{"output_throughput", "request_throughput", "total_token_throughput", "error_rate", "gpu_mem_used", "gpu_power"}
	for _, s := range []string{"ttft", "tpot", "itl", "e2el"} {
		for _, st := range []string{"mean", "median", "p90", "p95", "p99", "p99.9"} {
			names = append(names, s+"_"+st)
		}
	}
	return names
}()

// releases are the repository's published releases, each placed on the
// day of the point that measured its commit, else on its publication day.
func (h *Handler) releases(ctx context.Context, repo string, pts []store.SeriesPoint) ([]ReleaseMark, error) {
	entries, err := h.st.AuditByAction(ctx, repo, "release.published")
	if err != nil {
		return nil, err
	}
	byCommit := map[string]time.Time{}
	for _, p := range pts {
		if p.HeadSHA != "" {
			byCommit[p.HeadSHA] = p.Date
		}
	}
	seen := map[string]bool{}
	var out []ReleaseMark
	for _, e := range entries {
		var d struct {
			Tag    string `json:"tag"`
			Commit string `json:"commit"`
		}
		if json.Unmarshal(e.Detail, &d) != nil || d.Tag == "" || seen[d.Tag] {
			continue
		}
		seen[d.Tag] = true
		day := e.CreatedAt.UTC().Truncate(24 * time.Hour)
		if t, ok := byCommit[d.Commit]; ok {
			day = t
		}
		out = append(out, ReleaseMark{Date: day, Tag: d.Tag, Commit: d.Commit})
	}
	return out, nil
}

// Week is one ISO week of a series.
type Week struct {
	Start  time.Time `json:"start"` // Monday
	Label  string    `json:"label"` // 2025-W09
	Median float64   `json:"median"`
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
	N      int       `json:"n"`
	// Change is the median's change from the previous week with data.
	Change *float64 `json:"change,omitempty"`
	// Baseline is the level in force at the week's last night; Regressed
	// counts its nights a check run called a regression.
	Baseline  *float64 `json:"baseline,omitempty"`
	Regressed int      `json:"regressed,omitempty"`
}

// Weekly groups the points by ISO week.
func Weekly(pts []Point) []Week {
	var out []Week
	var cur []float64
	var base *float64
	regressed := 0
	flush := func(start time.Time) {
		if len(cur) == 0 {
			return
		}
		sort.Float64s(cur)
		y, wk := start.ISOWeek()
		w := Week{Start: start, Label: fmt.Sprintf("%d-W%02d", y, wk), Median: median(cur), Min: cur[0], Max: cur[len(cur)-1], N: len(cur),
			Baseline: base, Regressed: regressed}
		if len(out) > 0 && out[len(out)-1].Median != 0 {
			c := w.Median/out[len(out)-1].Median - 1
			w.Change = &c
		}
		out = append(out, w)
		cur, base, regressed = cur[:0], nil, 0
	}
	var start time.Time
	for _, p := range pts {
		m := monday(p.Date)
		if !m.Equal(start) {
			flush(start)
			start = m
		}
		cur = append(cur, p.Value)
		if p.Baseline != nil {
			base = p.Baseline
		}
		if p.Regression {
			regressed++
		}
	}
	flush(start)
	return out
}

func monday(t time.Time) time.Time {
	d := t.UTC().Truncate(24 * time.Hour)
	off := (int(d.Weekday()) + 6) % 7
	return d.AddDate(0, 0, -off)
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}
