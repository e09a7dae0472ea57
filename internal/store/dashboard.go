package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// Dashboard is the web dashboard's read side and the change-point records
// of the nightly pass. Store includes it; it lives in its own file so the
// queue's owners and the dashboard's do not edit the same code.
type Dashboard interface {
	// ListRepos returns every repository the store knows (from jobs and
	// trend points), by name.
	ListRepos(ctx context.Context) ([]string, error)
	// ListSeries returns the (key, metric) series of repo's trend.
	ListSeries(ctx context.Context, repo string) ([]SeriesInfo, error)
	// ListAllSeries returns every series of every repository.
	ListAllSeries(ctx context.Context) ([]SeriesInfo, error)
	// SeriesPoints returns one series from since's day on, oldest first,
	// each point with the commit and tier of the job that measured it.
	SeriesPoints(ctx context.Context, repo, key, metric string, since time.Time) ([]SeriesPoint, error)
	// RecentPoints returns every series of repo from since's day on, by
	// key, metric and day (no commits: the overview's sparklines need
	// only the values, for every series at once).
	RecentPoints(ctx context.Context, repo string, since time.Time) ([]TrendPoint, error)
	// RepoCheckRuns returns a repository's check runs, newest first.
	RepoCheckRuns(ctx context.Context, f CheckRunFilter) ([]CheckRun, error)
	// AuditByAction returns repo's audit entries with one action, oldest first.
	AuditByAction(ctx context.Context, repo, action string) ([]AuditEntry, error)

	// PutChangePoint inserts a record (ID 0) or replaces the one with ID.
	// Two records of one series on one day are ErrConflict.
	PutChangePoint(ctx context.Context, c ChangePointRecord) (ChangePointRecord, error)
	GetChangePoint(ctx context.Context, id int64) (ChangePointRecord, error)
	// ListChangePoints returns the records the filter selects, by series
	// and day.
	ListChangePoints(ctx context.Context, f ChangePointFilter) ([]ChangePointRecord, error)
}

// SeriesInfo names one trend series and its extent.
type SeriesInfo struct {
	Repo   string
	Key    string // "nightly/c=1", "merge", …
	Metric string
	Points int
	First  time.Time
	Last   time.Time
}

// SeriesPoint is one point of a series: a TrendPoint with the commit and
// tier of the job that measured it (empty when the job is gone).
type SeriesPoint struct {
	Date    time.Time
	Value   float64
	JobID   int64
	HeadSHA string
	Tier    string
}

// CheckRunFilter selects a repository's check runs; zero fields match all.
type CheckRunFilter struct {
	Repo   string // required
	Tier   string
	States []string
	Limit  int
}

// ChangePointRecord is a change point found on a default-branch series:
// where the level moved (the last good and first bad point, with their
// commits, which is what a bisect starts from), by how much, and what
// perfgate told people about it.
type ChangePointRecord struct {
	ID     int64
	Repo   string
	Key    string
	Metric string
	// Day is the date of the first point at the new level; GoodDay the
	// last point before it.
	Day, GoodDay         time.Time
	GoodSHA, BadSHA      string
	GoodJobID, BadJobID  int64
	MeanBefore           float64
	MeanAfter            float64
	StdBefore, StdAfter  float64
	Change               float64 // MeanAfter/MeanBefore − 1
	Magnitude            float64
	PValue               float64
	Regression           bool   // the change is in the metric's worse direction
	State                string // ChangePointOpen, ChangePointGone or ChangePointRetracted
	IssueNumber          int
	IssueURL             string
	SlackSent            bool
	CreatedAt, UpdatedAt time.Time
}

// Change point states: open while the latest analysis still finds it, gone
// when a later analysis no longer does (the series was re-measured).
const (
	ChangePointOpen = "open"
	ChangePointGone = "gone"
	// ChangePointRetracted: gone, and its issue closed as retracted.
	ChangePointRetracted = "retracted"
)

// ChangePointFilter selects change points; zero fields match everything.
type ChangePointFilter struct {
	Repo, Key, Metric string
	State             string
}

func (s *sqlStore) ListRepos(ctx context.Context) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT repo FROM jobs UNION SELECT repo FROM trend_points ORDER BY repo`)
	if err != nil {
		return nil, fmt.Errorf("list repos: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			return nil, fmt.Errorf("list repos: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list repos: %w", err)
	}
	return out, nil
}

func (s *sqlStore) ListSeries(ctx context.Context, repo string) ([]SeriesInfo, error) {
	return s.querySeries(ctx, "list series of "+repo, `SELECT repo, key, metric, COUNT(*), MIN(day), MAX(day)
		FROM trend_points WHERE repo = ? GROUP BY repo, key, metric ORDER BY key, metric`, repo)
}

func (s *sqlStore) ListAllSeries(ctx context.Context) ([]SeriesInfo, error) {
	return s.querySeries(ctx, "list series", `SELECT repo, key, metric, COUNT(*), MIN(day), MAX(day)
		FROM trend_points GROUP BY repo, key, metric ORDER BY repo, key, metric`)
}

func (s *sqlStore) querySeries(ctx context.Context, what, query string, args ...any) ([]SeriesInfo, error) {
	rows, err := s.r.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var out []SeriesInfo
	for rows.Next() {
		var (
			si          SeriesInfo
			first, last string
		)
		if err := rows.Scan(&si.Repo, &si.Key, &si.Metric, &si.Points, &first, &last); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if si.First, err = time.Parse(dayFormat, first); err != nil {
			return nil, fmt.Errorf("%s: day %q: %w", what, first, err)
		}
		if si.Last, err = time.Parse(dayFormat, last); err != nil {
			return nil, fmt.Errorf("%s: day %q: %w", what, last, err)
		}
		out = append(out, si)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

func (s *sqlStore) SeriesPoints(ctx context.Context, repo, key, metric string, since time.Time) ([]SeriesPoint, error) {
	what := fmt.Sprintf("series %s %s %s", repo, key, metric)
	rows, err := s.r.QueryContext(ctx, s.q(`SELECT t.day, t.value, t.job_id, COALESCE(j.head_sha, ''), COALESCE(j.tier, '')
		FROM trend_points t LEFT JOIN jobs j ON j.id = t.job_id
		WHERE t.repo = ? AND t.key = ? AND t.metric = ? AND t.day >= ? ORDER BY t.day`),
		repo, key, metric, since.UTC().Format(dayFormat))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var out []SeriesPoint
	for rows.Next() {
		var (
			p   SeriesPoint
			day string
		)
		if err := rows.Scan(&day, &p.Value, &p.JobID, &p.HeadSHA, &p.Tier); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if p.Date, err = time.Parse(dayFormat, day); err != nil {
			return nil, fmt.Errorf("%s: day %q: %w", what, day, err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

func (s *sqlStore) RecentPoints(ctx context.Context, repo string, since time.Time) ([]TrendPoint, error) {
	what := "recent points of " + repo
	rows, err := s.r.QueryContext(ctx, s.q(`SELECT key, metric, day, value, job_id FROM trend_points
		WHERE repo = ? AND day >= ? ORDER BY key, metric, day`), repo, since.UTC().Format(dayFormat))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var out []TrendPoint
	for rows.Next() {
		p := TrendPoint{Repo: repo}
		var day string
		if err := rows.Scan(&p.Key, &p.Metric, &day, &p.Value, &p.JobID); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if p.Date, err = time.Parse(dayFormat, day); err != nil {
			return nil, fmt.Errorf("%s: day %q: %w", what, day, err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

func (s *sqlStore) RepoCheckRuns(ctx context.Context, f CheckRunFilter) ([]CheckRun, error) {
	if f.Repo == "" {
		return nil, fmt.Errorf("repo check runs: repo is required")
	}
	query, args := `SELECT `+checkRunCols+` FROM check_runs WHERE repo = ?`, []any{f.Repo}
	if f.Tier != "" {
		query, args = query+` AND tier = ?`, append(args, f.Tier)
	}
	if len(f.States) > 0 {
		query += ` AND state IN (?` + strings.Repeat(", ?", len(f.States)-1) + `)`
		for _, st := range f.States {
			args = append(args, st)
		}
	}
	query += ` ORDER BY id DESC`
	if f.Limit > 0 {
		query, args = query+` LIMIT ?`, append(args, f.Limit)
	}
	return s.queryCheckRuns(ctx, "repo check runs "+f.Repo, query, args...)
}

func (s *sqlStore) AuditByAction(ctx context.Context, repo, action string) ([]AuditEntry, error) {
	what := fmt.Sprintf("audit %s of %s", action, repo)
	rows, err := s.r.QueryContext(ctx, s.q(`SELECT `+auditCols+` FROM audit_log WHERE repo = ? AND action = ? ORDER BY id`), repo, action)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var (
			e       AuditEntry
			d       string
			created sql.NullInt64
		)
		if err := rows.Scan(&e.ID, &e.Actor, &e.Action, &e.Repo, &e.PRNumber, &d, &created); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		e.Detail = parseDoc(d)
		e.CreatedAt = fromMicros(created)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}
