package web

import (
	"context"
	"net/http"
	"sort"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
)

// The front page of a signed-in person is the organisation at a glance,
// the page a team lead opens on Monday: every repository they may read
// with its open regressions and events, the week's verdicts, the fleet's
// queue and the month's GPU time and cost. It reads what the repository
// page and the usage API read, and prints the stored verdict documents
// with their own words (gate.Report's headline); it computes nothing of
// its own beyond counting and adding up.

// RepoGlance is one repository on the front page.
type RepoGlance struct {
	Repo string
	// Events are the open change points told as steps (as on the
	// repository page); Regressions counts those that moved the wrong way.
	Events      []*Event
	Regressions int
	// The month so far: GPU-hours and jobs the fleet spent on the
	// repository, and what the regressions it caught would have cost.
	MonthGPUHours   float64
	MonthJobs       int
	MonthCaughtUSD  float64
	OpenCost        OpenCost
	Queued, Running int
}

// WeekVerdict is one judged check run of the last seven days, told by its
// stored report: the headline, and the rows it called regressions.
type WeekVerdict struct {
	Repo, SHA, Tier string
	PR              int
	State           string
	UpdatedAt       time.Time
	Report          *gate.Report
}

// QueuedJob is a job waiting or running, of a repository the person may read.
type QueuedJob struct {
	Repo, Tier, SHA string
	PR              int
	Status          jobstate.Status
	Since           time.Time
}

// frontVerdicts is how many of the week's verdicts the page lists, newest
// first; the tally counts them all.
const frontVerdicts = 40

// weekVerdictLimit is how many check runs per repository the week's
// verdicts look at: a week of a busy repository, not its history.
const weekVerdictLimit = 100

func (h *Handler) frontPage(w http.ResponseWriter, r *http.Request, repos []string) {
	ctx := r.Context()
	now := h.now().UTC()
	weekAgo := now.AddDate(0, 0, -7)
	monthStart := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	queue, err := h.fleetQueue(ctx)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	var glances []*RepoGlance
	var verdicts []WeekVerdict
	byRepo := map[string]*RepoGlance{}
	for _, repo := range repos {
		g, vs, err := h.glance(ctx, repo, weekAgo, monthStart)
		if err != nil {
			h.internal(w, r, err)
			return
		}
		glances = append(glances, g)
		byRepo[repo] = g
		verdicts = append(verdicts, vs...)
	}
	// The queue names only repositories the person may read; the fleet's
	// totals are counts, which name none.
	var jobs []QueuedJob
	for _, j := range queue {
		g := byRepo[j.Repo]
		if g == nil {
			continue
		}
		if j.Status == jobstate.Running {
			g.Running++
		} else {
			g.Queued++
		}
		since := j.CreatedAt
		if j.Status == jobstate.Running && !j.StartedAt.IsZero() {
			since = j.StartedAt
		}
		jobs = append(jobs, QueuedJob{Repo: j.Repo, Tier: j.Tier, SHA: j.HeadSHA, PR: j.PRNumber, Status: j.Status, Since: since})
	}
	var fleetQueued, fleetRunning int
	for _, j := range queue {
		if j.Status == jobstate.Running {
			fleetRunning++
		} else {
			fleetQueued++
		}
	}
	// What needs a look first: repositories with open regressions, then by name.
	sort.SliceStable(glances, func(i, j int) bool {
		if (glances[i].Regressions > 0) != (glances[j].Regressions > 0) {
			return glances[i].Regressions > 0
		}
		return glances[i].Repo < glances[j].Repo
	})
	sort.SliceStable(verdicts, func(i, j int) bool { return verdicts[i].UpdatedAt.After(verdicts[j].UpdatedAt) })
	tally := map[gate.Verdict]int{}
	for _, v := range verdicts {
		tally[v.Report.Verdict]++
	}
	more := 0
	if len(verdicts) > frontVerdicts {
		more = len(verdicts) - frontVerdicts
		verdicts = verdicts[:frontVerdicts]
	}
	var month struct {
		GPUHours, CaughtUSD, OpenUSD float64
		Jobs                         int
	}
	for _, g := range glances {
		month.GPUHours += g.MonthGPUHours
		month.Jobs += g.MonthJobs
		month.CaughtUSD += g.MonthCaughtUSD
		month.OpenUSD += g.OpenCost.MonthlyUSD
	}
	h.render(w, r, "front", map[string]any{"Title": "perfgate", "Repos": glances, "Verdicts": verdicts, "MoreVerdicts": more,
		"Tally": []struct {
			Verdict gate.Verdict
			N       int
		}{{gate.Regression, tally[gate.Regression]}, {gate.Inconclusive, tally[gate.Inconclusive]}, {gate.Pass, tally[gate.Pass]}},
		"Jobs":        jobs,
		"FleetQueued": fleetQueued, "FleetRunning": fleetRunning, "Month": month, "MonthName": monthStart.Format("January 2006"),
		"WeekFrom": weekAgo, "UsageNote": usageNote})
}

// glance reads one repository's part of the front page.
func (h *Handler) glance(ctx context.Context, repo string, weekAgo, monthStart time.Time) (*RepoGlance, []WeekVerdict, error) {
	g := &RepoGlance{Repo: repo}
	open, err := h.st.ListChangePoints(ctx, store.ChangePointFilter{Repo: repo, State: store.ChangePointOpen})
	if err != nil {
		return nil, nil, err
	}
	g.Events = events(open)
	for _, e := range g.Events {
		if e.Regression {
			g.Regressions++
		}
	}
	rows, err := h.st.Usage(ctx, store.UsageFilter{Repo: repo, Since: monthStart})
	if err != nil {
		return nil, nil, err
	}
	for _, u := range rows {
		g.MonthGPUHours += u.GPUHours
		g.MonthJobs += u.Jobs
		g.MonthCaughtUSD += u.RegressionUSDMonth
	}
	if g.OpenCost, err = h.openCost(ctx, repo); err != nil {
		return nil, nil, err
	}
	crs, err := h.st.RepoCheckRuns(ctx, store.CheckRunFilter{Repo: repo, Limit: weekVerdictLimit})
	if err != nil {
		return nil, nil, err
	}
	var vs []WeekVerdict
	for _, cr := range crs {
		if cr.UpdatedAt.Before(weekAgo) {
			continue
		}
		rep := storedReport(cr.Verdict)
		if rep == nil {
			continue // not judged yet: the queue shows it
		}
		vs = append(vs, WeekVerdict{Repo: repo, SHA: cr.HeadSHA, Tier: cr.Tier, PR: cr.PRNumber, State: cr.State, UpdatedAt: cr.UpdatedAt, Report: rep})
	}
	return g, vs, nil
}

// fleetQueue is every job waiting or running, in the order claims take them.
func (h *Handler) fleetQueue(ctx context.Context) ([]store.Job, error) {
	running, err := h.st.ListJobs(ctx, store.JobFilter{Status: jobstate.Running})
	if err != nil {
		return nil, err
	}
	queued, err := h.st.ListJobs(ctx, store.JobFilter{Status: jobstate.Queued, ClaimOrder: true})
	if err != nil {
		return nil, err
	}
	return append(running, queued...), nil
}
