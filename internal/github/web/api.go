package web

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/perfgate/perfgate/internal/store"
)

// The read API, under /api/data/ (the agents' API owns /api/v1/):
//
//	GET /api/data/repos
//	GET /api/data/repos/{owner}/{name}/series                        the series (key × metric) and their extent
//	GET /api/data/repos/{owner}/{name}/series/points?key=&metric=[&since=|&days=][&format=csv]
//	GET /api/data/repos/{owner}/{name}/checks[?tier=&limit=]         check runs, newest first
//	GET /api/data/repos/{owner}/{name}/checks/{sha}/{tier}           one check run, with runs, CDFs, telemetry, history
//	GET /api/data/repos/{owner}/{name}/jobs/{id}/runs[?format=csv]   a job's measured runs (summaries)
//	GET /api/data/repos/{owner}/{name}/changepoints[?key=&metric=&state=][&format=csv]
//	GET /api/data/repos/{owner}/{name}/usage[?weeks=N]                GPU-hours, jobs, baseline reuse, regressions by tier and week

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(w, "encode JSON: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

func wantCSV(r *http.Request) bool { return r.URL.Query().Get("format") == "csv" }

func writeCSV(w http.ResponseWriter, name string, rows [][]string) {
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", name))
	cw := csv.NewWriter(w)
	_ = cw.WriteAll(rows) // the client went away: nothing to tell it
}

func (h *Handler) apiRepos(w http.ResponseWriter, r *http.Request) {
	repos, err := h.st.ListRepos(r.Context())
	if err != nil {
		h.internal(w, r, err)
		return
	}
	out := []string{}
	for _, repo := range repos {
		if h.allowed(w, r, repo) {
			out = append(out, repo)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"repos": out})
}

type seriesInfoJSON struct {
	Key    string    `json:"key"`
	Tier   string    `json:"tier"`
	Cell   string    `json:"cell,omitempty"`
	Metric string    `json:"metric"`
	Points int       `json:"points"`
	First  time.Time `json:"first"`
	Last   time.Time `json:"last"`
	URL    string    `json:"url"`
}

func (h *Handler) apiSeriesList(w http.ResponseWriter, r *http.Request, repo string) {
	series, err := h.st.ListSeries(r.Context(), repo)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	out := []seriesInfoJSON{}
	for _, s := range series {
		tier, cell := splitKey(s.Key)
		out = append(out, seriesInfoJSON{Key: s.Key, Tier: tier, Cell: cell, Metric: s.Metric, Points: s.Points, First: s.First, Last: s.Last,
			URL: "/api/data/repos/" + repo + "/series/points?key=" + s.Key + "&metric=" + s.Metric})
	}
	writeJSON(w, http.StatusOK, map[string]any{"repo": repo, "series": out})
}

func (h *Handler) apiSeriesPoints(w http.ResponseWriter, r *http.Request, repo string) {
	key, metric := r.URL.Query().Get("key"), r.URL.Query().Get("metric")
	if key == "" || metric == "" {
		h.fail(w, r, http.StatusBadRequest, "key and metric are required, e.g. ?key=nightly/c=1&metric=tpot_p99 (GET …/series lists them)")
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
	if s.Points == nil {
		s.Points = []Point{}
	}
	if wantCSV(r) {
		rows := [][]string{{"date", "value", "unit", "commit", "job_id", "baseline", "regression", "change_point"}}
		cpDays := map[string]string{}
		for _, c := range s.ChangePoints {
			cpDays[c.Date.Format("2006-01-02")] = pctString(c.Change)
		}
		for _, p := range s.Points {
			base := ""
			if p.Baseline != nil {
				base = strconv.FormatFloat(*p.Baseline, 'g', -1, 64)
			}
			day := p.Date.Format("2006-01-02")
			rows = append(rows, []string{day, strconv.FormatFloat(p.Value, 'g', -1, 64), s.Unit, p.Commit,
				strconv.FormatInt(p.JobID, 10), base, strconv.FormatBool(p.Regression), cpDays[day]})
		}
		writeCSV(w, fmt.Sprintf("%s-%s-%s.csv", repo, key, metric), rows)
		return
	}
	writeJSON(w, http.StatusOK, s)
}

func (h *Handler) apiCheckRuns(w http.ResponseWriter, r *http.Request, repo string) {
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	if limit <= 0 || limit > 500 {
		limit = 100
	}
	crs, err := h.st.RepoCheckRuns(r.Context(), store.CheckRunFilter{Repo: repo, Tier: r.URL.Query().Get("tier"), Limit: limit})
	if err != nil {
		h.internal(w, r, err)
		return
	}
	type item struct {
		SHA       string    `json:"sha"`
		Tier      string    `json:"tier"`
		PR        int       `json:"pr,omitempty"`
		State     string    `json:"state"`
		UpdatedAt time.Time `json:"updated_at"`
		URL       string    `json:"url"`
	}
	out := []item{}
	for _, c := range crs {
		out = append(out, item{SHA: c.HeadSHA, Tier: c.Tier, PR: c.PRNumber, State: c.State, UpdatedAt: c.UpdatedAt,
			URL: "/api/data/repos/" + repo + "/checks/" + c.HeadSHA + "/" + c.Tier})
	}
	writeJSON(w, http.StatusOK, map[string]any{"repo": repo, "check_runs": out})
}

func (h *Handler) apiCheckRun(w http.ResponseWriter, r *http.Request, repo string) {
	cr, err := h.loadCheckRun(r.Context(), repo, r.PathValue("sha"), r.PathValue("tier"), false)
	if errors.Is(err, store.ErrNotFound) {
		h.fail(w, r, http.StatusNotFound, "no such check run")
		return
	}
	if err != nil {
		h.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, cr)
}

func (h *Handler) apiRuns(w http.ResponseWriter, r *http.Request, repo string) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, "job id must be a number")
		return
	}
	job, err := h.st.GetJob(r.Context(), id)
	if err != nil || job.Repo != repo {
		h.fail(w, r, http.StatusNotFound, fmt.Sprintf("%s has no job %d", repo, id))
		return
	}
	res, err := h.st.ListResults(r.Context(), id)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	type run struct {
		Index       int             `json:"index"`
		Kind        string          `json:"kind"`
		Attempt     int             `json:"attempt"`
		GPUUUID     string          `json:"gpu_uuid,omitempty"`
		Summary     json.RawMessage `json:"summary,omitempty"`
		Environment json.RawMessage `json:"environment,omitempty"`
	}
	out := []run{}
	rows := [][]string{{"run", "kind", "attempt", "metric", "value"}}
	for _, x := range res {
		out = append(out, run{Index: x.RunIndex, Kind: string(x.Kind), Attempt: x.Attempt, GPUUUID: x.GPUUUID, Summary: x.Summary, Environment: x.Environment})
		if rr, err := parseRun(x.Samples); err == nil {
			for _, m := range metricNames {
				if vs := runValues(rr, m); len(vs) == 1 {
					rows = append(rows, []string{strconv.Itoa(x.RunIndex), string(x.Kind), strconv.Itoa(x.Attempt), m, strconv.FormatFloat(vs[0], 'g', -1, 64)})
				}
			}
		}
	}
	if wantCSV(r) {
		writeCSV(w, fmt.Sprintf("job-%d-runs.csv", id), rows)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"job_id": id, "sha": job.HeadSHA, "tier": job.Tier, "status": job.Status, "runs": out})
}

func (h *Handler) apiChangePoints(w http.ResponseWriter, r *http.Request, repo string) {
	q := r.URL.Query()
	cps, err := h.st.ListChangePoints(r.Context(), store.ChangePointFilter{Repo: repo, Key: q.Get("key"), Metric: q.Get("metric"), State: q.Get("state")})
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if wantCSV(r) {
		rows := [][]string{{"id", "key", "metric", "day", "good_commit", "bad_commit", "mean_before", "mean_after", "change", "magnitude", "p_value", "regression", "state", "issue"}}
		for _, c := range cps {
			rows = append(rows, []string{strconv.FormatInt(c.ID, 10), c.Key, c.Metric, c.Day.Format("2006-01-02"), c.GoodSHA, c.BadSHA,
				strconv.FormatFloat(c.MeanBefore, 'g', -1, 64), strconv.FormatFloat(c.MeanAfter, 'g', -1, 64),
				strconv.FormatFloat(c.Change, 'g', 6, 64), strconv.FormatFloat(c.Magnitude, 'g', 6, 64), strconv.FormatFloat(c.PValue, 'g', 6, 64),
				strconv.FormatBool(c.Regression), c.State, c.IssueURL})
		}
		writeCSV(w, repo+"-change-points.csv", rows)
		return
	}
	type cpJSON struct {
		ID         int64     `json:"id"`
		Key        string    `json:"key"`
		Metric     string    `json:"metric"`
		Day        time.Time `json:"day"`
		GoodDay    time.Time `json:"good_day"`
		GoodCommit string    `json:"good_commit"`
		BadCommit  string    `json:"bad_commit"`
		GoodJobID  int64     `json:"good_job_id"`
		BadJobID   int64     `json:"bad_job_id"`
		MeanBefore float64   `json:"mean_before"`
		MeanAfter  float64   `json:"mean_after"`
		StdBefore  float64   `json:"stddev_before"`
		StdAfter   float64   `json:"stddev_after"`
		Change     float64   `json:"change"`
		Magnitude  float64   `json:"magnitude"`
		PValue     float64   `json:"p_value"`
		Regression bool      `json:"regression"`
		State      string    `json:"state"`
		IssueURL   string    `json:"issue_url,omitempty"`
		SeriesURL  string    `json:"series_url"`
	}
	out := []cpJSON{}
	for _, c := range cps {
		out = append(out, cpJSON{ID: c.ID, Key: c.Key, Metric: c.Metric, Day: c.Day, GoodDay: c.GoodDay, GoodCommit: c.GoodSHA, BadCommit: c.BadSHA,
			GoodJobID: c.GoodJobID, BadJobID: c.BadJobID, MeanBefore: c.MeanBefore, MeanAfter: c.MeanAfter, StdBefore: c.StdBefore, StdAfter: c.StdAfter,
			Change: c.Change, Magnitude: c.Magnitude, PValue: c.PValue, Regression: c.Regression, State: c.State, IssueURL: c.IssueURL,
			SeriesURL: seriesPath(repo, c.Key, c.Metric, "")})
	}
	writeJSON(w, http.StatusOK, map[string]any{"repo": repo, "change_points": out})
}
