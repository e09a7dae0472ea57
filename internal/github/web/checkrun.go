package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/cost"
	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/result"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// CheckRun is a check run's page and API answer: the verdict's table, each
// run's value per metric, the per-request latency distributions of base
// and head, the environment, GPU telemetry, the job logs and the history.
type CheckRun struct {
	Repo        string              `json:"repo"`
	SHA         string              `json:"sha"`
	Tier        string              `json:"tier"`
	PR          int                 `json:"pr,omitempty"`
	State       string              `json:"state"`
	Deadline    time.Time           `json:"deadline,omitzero"`
	CreatedAt   time.Time           `json:"created_at"`
	UpdatedAt   time.Time           `json:"updated_at"`
	Report      *gate.Report        `json:"report,omitempty"`
	Notes       []string            `json:"notes,omitempty"`
	Environment *result.Environment `json:"environment,omitempty"`
	Runs        []MetricRuns        `json:"runs"`
	CDFs        []CDF               `json:"cdfs"`
	Telemetry   []Telemetry         `json:"telemetry"`
	Jobs        []JobInfo           `json:"jobs"`
	Appeals     []store.Appeal      `json:"appeals"`
	Audit       []store.AuditEntry  `json:"audit"`

	// Cost is what the regression costs a month at the repository's
	// declared price; nil without one.
	Cost *cost.Estimate `json:"cost,omitempty"`

	// LongRun is a capacity or soak check's verdict (longrun.go).
	LongRun *LongRun `json:"long_run,omitempty"`
}

// MetricRuns is one metric's value in every run, head and base: the
// spread the verdict's medians summarise.
type MetricRuns struct {
	Metric string    `json:"metric"` // "c=1 tpot_p99" in a matrix
	Base   []float64 `json:"base"`
	Head   []float64 `json:"head"`
}

// CDF is the per-request distribution of one latency, base and head runs
// pooled (for the picture only: the gate never pools requests), on a
// common grid of X values in ms.
type CDF struct {
	Series string    `json:"series"` // ttft, tpot, e2el
	Cell   string    `json:"cell,omitempty"`
	X      []float64 `json:"x"`
	Base   []float64 `json:"base"`
	Head   []float64 `json:"head"`
	NBase  int       `json:"n_base"`
	NHead  int       `json:"n_head"`
}

// Telemetry is one measured run's NVML summary.
type Telemetry struct {
	JobID   int64                       `json:"job_id"`
	Run     int                         `json:"run"`
	GPU     string                      `json:"gpu"`
	Summary *result.GPUSummary          `json:"summary,omitempty"`
	Series  map[string]result.Aggregate `json:"-"`
}

// JobInfo is one job of the check run and where its log is.
type JobInfo struct {
	ID       int64  `json:"id"`
	Kind     string `json:"kind"`
	Cell     string `json:"cell,omitempty"`
	Status   string `json:"status"`
	Attempts int    `json:"attempts"`
	Reason   string `json:"failure_reason,omitempty"`
	LogURL   string `json:"log_url"`
	Log      string `json:"-"`
	LogCut   bool   `json:"-"`
}

// maxLogShown is how much of a job's log the page shows (its end).
const maxLogShown = 64 << 10

func (h *Handler) loadCheckRun(ctx context.Context, repo, sha, tier string, withLogs bool) (*CheckRun, error) {
	cr, err := h.st.GetCheckRun(ctx, repo, sha, tier)
	if err != nil {
		return nil, err
	}
	out := &CheckRun{Repo: repo, SHA: sha, Tier: tier, PR: cr.PRNumber, State: cr.State, Deadline: cr.Deadline,
		CreatedAt: cr.CreatedAt, UpdatedAt: cr.UpdatedAt, Runs: []MetricRuns{}, CDFs: []CDF{}, Telemetry: []Telemetry{}, Jobs: []JobInfo{}}
	var doc struct {
		Report *gate.Report        `json:"report"`
		Env    *result.Environment `json:"environment"`
		Notes  []string            `json:"notes"`
	}
	if len(cr.Verdict) > 0 {
		if err := json.Unmarshal(cr.Verdict, &doc); err != nil {
			out.Notes = append(out.Notes, "the stored verdict could not be read: "+err.Error())
		}
	}
	out.Report, out.Environment, out.Notes = doc.Report, doc.Env, append(out.Notes, doc.Notes...)
	out.Cost = verdictCost(cr.Verdict)
	out.LongRun = longRunOf(cr.Verdict)

	// Head runs per matrix cell, with the jobs that measured them.
	heads := map[string][]*result.Result{}
	var cells []string
	for _, id := range cr.JobIDs {
		job, err := h.st.GetJob(ctx, id)
		if err != nil {
			return nil, err
		}
		cell := jobCell(job)
		info := JobInfo{ID: job.ID, Kind: job.Kind, Cell: cell, Status: string(job.Status), Attempts: job.Attempts, Reason: job.FailureReason,
			LogURL: fmt.Sprintf("/r/%s/jobs/%d/log", repo, job.ID)}
		if withLogs {
			lg, err := h.st.ReadLog(ctx, job.ID, 0)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return nil, err
			}
			if len(lg) > maxLogShown {
				lg, info.LogCut = lg[len(lg)-maxLogShown:], true
			}
			info.Log = string(lg)
		}
		out.Jobs = append(out.Jobs, info)
		if job.Kind == "baseline" {
			continue // the base commit measured for a first baseline: shown as base below
		}
		runs, err := h.measuredRuns(ctx, job)
		if err != nil {
			return nil, err
		}
		if _, ok := heads[cell]; !ok {
			cells = append(cells, cell)
		}
		heads[cell] = append(heads[cell], runs...)
		for i, r := range runs {
			if r.Perfgate != nil {
				out.Telemetry = append(out.Telemetry, Telemetry{JobID: job.ID, Run: i + 1, GPU: r.Perfgate.Environment.GPUName, Summary: r.Perfgate.GPU})
			}
		}
	}
	sort.Strings(cells)
	metrics := reportMetrics(out.Report)
	for _, cell := range cells {
		key := tier
		if cell != "" {
			key = tier + "/" + cell
		}
		base, err := h.baselineRunsAt(ctx, repo, key, cr.UpdatedAt)
		if err != nil {
			return nil, err
		}
		for _, m := range metrics {
			name := m
			if cell != "" {
				if !strings.HasPrefix(m, cell+" ") {
					continue
				}
				name = strings.TrimPrefix(m, cell+" ")
			}
			out.Runs = append(out.Runs, MetricRuns{Metric: m, Base: runValues(base, name), Head: runValues(heads[cell], name)})
		}
		for _, s := range []string{"ttft", "tpot", "e2el"} {
			if c, ok := cdf(s, base, heads[cell]); ok {
				c.Cell = cell
				out.CDFs = append(out.CDFs, c)
			}
		}
	}
	if out.Appeals, err = h.st.ListAppeals(ctx, repo, cr.PRNumber); err != nil {
		return nil, err
	}
	if out.Audit, err = h.auditOf(ctx, repo, cr); err != nil {
		return nil, err
	}
	if out.Appeals == nil {
		out.Appeals = []store.Appeal{}
	}
	return out, nil
}

// jobCell reads the matrix cell from a job's config snapshot.
func jobCell(job store.Job) string {
	var snap struct {
		Cell string `json:"cell"`
	}
	if json.Unmarshal(job.Config, &snap) != nil {
		return ""
	}
	return snap.Cell
}

// measuredRuns decodes a job's measured runs of its latest attempt.
func (h *Handler) measuredRuns(ctx context.Context, job store.Job) ([]*result.Result, error) {
	res, err := h.st.ListResults(ctx, job.ID)
	if err != nil {
		return nil, err
	}
	var out []*result.Result
	for _, r := range res {
		if r.Kind != jobstate.KindMeasured {
			continue
		}
		rr, err := result.Parse(r.Samples)
		if err != nil {
			h.log.Warn().Err(err).Int64("result", r.ID).Msg("dashboard: result not readable")
			continue
		}
		out = append(out, rr)
	}
	return out, nil
}

// baselineRunsAt decodes the baseline of key that was current at t.
func (h *Handler) baselineRunsAt(ctx context.Context, repo, key string, t time.Time) ([]*result.Result, error) {
	hist, err := h.st.BaselineHistory(ctx, repo, key)
	if err != nil {
		return nil, err
	}
	for _, b := range hist { // newest first
		if !b.CreatedAt.After(t) {
			runs, err := gate.ParseRuns(b.Runs)
			if err != nil {
				return nil, fmt.Errorf("baseline %s %s v%d: %w", repo, key, b.Version, err)
			}
			return runs, nil
		}
	}
	return nil, nil
}

func reportMetrics(rep *gate.Report) []string {
	if rep == nil {
		return nil
	}
	var out []string
	for _, m := range rep.Metrics {
		out = append(out, m.Metric)
	}
	return out
}

// runValues is each run's value of a config metric.
func runValues(runs []*result.Result, metric string) []float64 {
	out := []float64{}
	for _, r := range runs {
		if v, ok := gate.MedianOf([]*result.Result{r}, metric); ok {
			out = append(out, v)
		}
	}
	return out
}

// requests pools one latency over the runs' successful requests, in ms.
func requests(series string, runs []*result.Result) []float64 {
	var out []float64
	for _, r := range runs {
		ok := func(i int) bool { return i >= len(r.Errors) || r.Errors[i] == "" }
		switch series {
		case "ttft":
			for i, v := range r.TTFTs {
				if ok(i) && v > 0 {
					out = append(out, v*1000)
				}
			}
		case "tpot", "e2el":
			if r.Perfgate == nil {
				continue
			}
			vs := r.Perfgate.TPOTs
			if series == "e2el" {
				vs = r.Perfgate.E2ELs
			}
			for i, v := range vs {
				if ok(i) && v > 0 {
					out = append(out, v)
				}
			}
		}
	}
	return out
}

// cdfPoints is the grid size of a drawn CDF.
const cdfPoints = 120

func cdf(series string, base, head []*result.Result) (CDF, bool) {
	b, hd := requests(series, base), requests(series, head)
	if len(b) == 0 && len(hd) == 0 {
		return CDF{}, false
	}
	sort.Float64s(b)
	sort.Float64s(hd)
	lo, hi := first(b, hd), last(b, hd)
	c := CDF{Series: series, NBase: len(b), NHead: len(hd)}
	for i := 0; i < cdfPoints; i++ {
		x := lo + (hi-lo)*float64(i)/float64(cdfPoints-1)
		c.X = append(c.X, x)
		c.Base = append(c.Base, fraction(b, x))
		c.Head = append(c.Head, fraction(hd, x))
	}
	return c, true
}

func first(a, b []float64) float64 {
	switch {
	case len(a) == 0:
		return b[0]
	case len(b) == 0:
		return a[0]
	}
	return min(a[0], b[0])
}

func last(a, b []float64) float64 {
	switch {
	case len(a) == 0:
		return b[len(b)-1]
	case len(b) == 0:
		return a[len(a)-1]
	}
	return max(a[len(a)-1], b[len(b)-1])
}

// fraction is the share of sorted values ≤ x; NaN-free for empty input.
func fraction(sorted []float64, x float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	n := sort.Search(len(sorted), func(i int) bool { return sorted[i] > x })
	return float64(n) / float64(len(sorted))
}

// auditOf is the check run's history: its PR's entries, or for a run off
// any PR (nightly, merge queue) the repository's entries naming its commit.
func (h *Handler) auditOf(ctx context.Context, repo string, cr store.CheckRun) ([]store.AuditEntry, error) {
	entries, err := h.st.ListAudit(ctx, repo, cr.PRNumber)
	if err != nil {
		return nil, err
	}
	out := []store.AuditEntry{}
	for _, e := range entries {
		if cr.PRNumber != 0 || strings.Contains(string(e.Detail), cr.HeadSHA) {
			out = append(out, e)
		}
	}
	return out, nil
}

func (h *Handler) checkRunPage(w http.ResponseWriter, r *http.Request, repo string) {
	sha, tier := r.PathValue("sha"), r.PathValue("tier")
	cr, err := h.loadCheckRun(r.Context(), repo, sha, tier, true)
	if errors.Is(err, store.ErrNotFound) {
		h.fail(w, r, http.StatusNotFound, fmt.Sprintf("%s has no %s check run on %s.", repo, tier, rev.Short(sha)))
		return
	}
	if err != nil {
		h.internal(w, r, err)
		return
	}
	h.render(w, r, "checkrun", map[string]any{"Title": fmt.Sprintf("%s %s · %s", tier, rev.Short(sha), repo), "Repo": repo, "C": cr,
		"EnvRows": envRows(cr.Environment), "TelemetryNames": telemetryNames(cr.Telemetry), "Profiles": h.profileArtifacts(r, repo, sha),
		"Escalation": escalation(cr, h.now()), "History": historyRows(cr.Audit)})
}

// escalation words the check's escalation clock: "escalates 2026-12-04
// 11:00 UTC (in 3 h 20 min)", "" when it has none.
func escalation(cr *CheckRun, now time.Time) string {
	if cr.Deadline.IsZero() || cr.Deadline.Year() < 2000 {
		return ""
	}
	at := cr.Deadline.UTC().Format("2006-01-02 15:04 UTC")
	switch d := cr.Deadline.Sub(now); {
	case cr.State == "escalated" || d <= 0:
		return "escalation deadline " + at + " (passed)"
	default:
		return "escalates " + at + " (in " + roughly(d) + ") unless fixed, retested or appealed"
	}
}

func roughly(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%d days", int(d.Hours()/24))
	case d >= time.Hour:
		return fmt.Sprintf("%d h %d min", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%d min", int(math.Ceil(d.Minutes())))
}

// historyRow is an audit entry for people: its detail as key–value pairs,
// times as times, a zero time ("0001-01-01T00:00:00Z", what a cleared
// clock encodes to) as "none".
type historyRow struct {
	When          time.Time
	Actor, Action string
	Detail        []kv
}

func historyRows(entries []store.AuditEntry) []historyRow {
	out := make([]historyRow, 0, len(entries))
	for _, e := range entries {
		row := historyRow{When: e.CreatedAt, Actor: e.Actor, Action: e.Action}
		var m map[string]any
		if json.Unmarshal(e.Detail, &m) == nil {
			keys := make([]string, 0, len(m))
			for k := range m {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				row.Detail = append(row.Detail, kv{k, detailText(m[k])})
			}
		} else if len(e.Detail) > 0 {
			row.Detail = []kv{{"detail", string(e.Detail)}}
		}
		out = append(out, row)
	}
	return out
}

func detailText(v any) string {
	switch x := v.(type) {
	case string:
		if t, err := time.Parse(time.RFC3339Nano, x); err == nil {
			if t.Year() < 2000 {
				return "none"
			}
			return t.UTC().Format("2006-01-02 15:04 UTC")
		}
		if len(x) == 40 && strings.Trim(x, "0123456789abcdef") == "" {
			return rev.Short(x)
		}
		return x
	case nil:
		return "none"
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e15 {
			return fmt.Sprintf("%d", int64(x))
		}
		return formatNum(x)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

type kv struct{ K, V string }

func envRows(e *result.Environment) []kv {
	if e == nil {
		return nil
	}
	var out []kv
	add := func(k, v string) {
		if v != "" && v != "0" {
			out = append(out, kv{k, v})
		}
	}
	add("GPU", e.GPUName)
	add("GPU UUID", e.GPUUUID)
	add("GPUs", fmt.Sprint(e.GPUCount))
	add("driver", e.Driver)
	add("CUDA", e.CUDA)
	add("power limit (W)", formatNum(e.PowerLimitW))
	add("SM clock (MHz)", fmt.Sprint(e.SMClockMHz))
	add("memory clock (MHz)", fmt.Sprint(e.MemClockMHz))
	add("ECC", e.ECCMode)
	add("MIG", e.MIGMode)
	add("persistence", e.Persistence)
	add("engine image", e.EngineImage)
	add("engine version", strings.TrimSpace(e.EngineName+" "+e.EngineVersion))
	add("commit", e.Commit)
	add("host", e.Hostname)
	if e.Sim {
		add("engine", "perfgate's simulated engine")
	}
	return out
}

func telemetryNames(ts []Telemetry) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range ts {
		if t.Summary == nil {
			continue
		}
		for k := range t.Summary.Series {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}

func parseRun(samples []byte) ([]*result.Result, error) {
	r, err := result.Parse(samples)
	if err != nil {
		return nil, err
	}
	return []*result.Result{r}, nil
}
