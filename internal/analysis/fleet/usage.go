package fleet

import (
	"fmt"
	"time"
)

// UsageAttempt is one attempt of a job on a GPU: from its claim to its
// finish, or to the reaper's verdict when its agent was lost.
type UsageAttempt struct {
	JobID          int64
	Repo, Tier     string
	Started, Ended time.Time
}

// UsageReuse is a check judged against a baseline stored earlier instead
// of one measured for it (ReusedBaseline).
type UsageReuse struct {
	Repo, Tier string
	Created    time.Time
}

// UsageRegression is one regression the gate called on a commit.
type UsageRegression struct {
	Repo, Tier, SHA string
	At              time.Time
	// MonthlyUSD is what the regression would cost a month at the
	// repository's declared price (internal/analysis/cost); 0 when none.
	MonthlyUSD float64
}

// UsageRow is one repository's use of the fleet in one tier and ISO week.
type UsageRow struct {
	Repo string `json:"repo"`
	Tier string `json:"tier"`
	// Week is the ISO week, "2025-W09"; WeekStart its Monday, 00:00 UTC.
	Week      string    `json:"week"`
	WeekStart time.Time `json:"week_start"`
	// GPUHours sums every attempt's time on its card, lost attempts
	// included: that time was spent.
	GPUHours float64 `json:"gpu_hours"`
	// Jobs counts the jobs with an attempt that ended that week.
	Jobs int `json:"jobs"`
	// BaselineReuse counts checks judged against a stored baseline rather
	// than one measured for them: a job not run.
	BaselineReuse int `json:"baseline_reuse"`
	// Regressions counts the commits the gate called a regression.
	Regressions int `json:"regressions"`
	// RegressionUSDMonth sums what those regressions would cost a month at
	// the repository's declared price (cost: in perfgate.yml), had they
	// shipped; 0 when no price is declared or none was priced.
	RegressionUSDMonth float64 `json:"regression_usd_month"`
}

// Week names t's ISO week and gives its Monday.
func Week(t time.Time) (string, time.Time) {
	t = t.UTC()
	y, w := t.ISOWeek()
	day := (int(t.Weekday()) + 6) % 7 // Monday 0
	start := time.Date(t.Year(), t.Month(), t.Day()-day, 0, 0, 0, 0, time.UTC)
	return fmt.Sprintf("%04d-W%02d", y, w), start
}

// WeeksBack is the Monday, 00:00 UTC, that starts the last n ISO weeks up
// to now (n = 1: this week).
func WeeksBack(now time.Time, n int) time.Time {
	_, start := Week(now)
	return start.AddDate(0, 0, -7*(max(n, 1)-1))
}

// ReusedBaseline reports whether a check whose verdict the gate reached
// with design (report.design) and whose base was measured by baselineJob
// (0: none) reused a stored baseline: a job not run. Interleaved checks
// measure their base in the same job and never count.
func ReusedBaseline(design string, baselineJob int64) bool {
	return baselineJob == 0 && (design == "stored" || design == "recent")
}

// Usage sums attempts, baseline reuses and regressions by repository, tier and
// week, sorted by week (newest first), repository and tier.
func Usage(attempts []UsageAttempt, reuses []UsageReuse, regressions []UsageRegression) []UsageRow {
	type key struct{ repo, tier, week string }
	rows := map[key]*UsageRow{}
	row := func(repo, tier string, at time.Time) *UsageRow {
		w, start := Week(at)
		k := key{repo, tier, w}
		r, ok := rows[k]
		if !ok {
			r = &UsageRow{Repo: repo, Tier: tier, Week: w, WeekStart: start}
			rows[k] = r
		}
		return r
	}
	jobs := map[key]map[int64]bool{}
	for _, a := range attempts {
		if a.Ended.Before(a.Started) || a.Started.IsZero() {
			continue
		}
		r := row(a.Repo, a.Tier, a.Ended)
		r.GPUHours += a.Ended.Sub(a.Started).Hours()
		k := key{r.Repo, r.Tier, r.Week}
		if jobs[k] == nil {
			jobs[k] = map[int64]bool{}
		}
		jobs[k][a.JobID] = true
	}
	for k, ids := range jobs {
		rows[k].Jobs = len(ids)
	}
	for _, c := range reuses {
		row(c.Repo, c.Tier, c.Created).BaselineReuse++
	}
	caught := map[[3]string]bool{}
	for _, g := range regressions {
		k := [3]string{g.Repo, g.Tier, g.SHA}
		if g.SHA != "" && caught[k] {
			continue // a retest confirming it is the same regression
		}
		caught[k] = true
		r := row(g.Repo, g.Tier, g.At)
		r.Regressions++
		r.RegressionUSDMonth += g.MonthlyUSD
	}
	out := make([]UsageRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	sortUsage(out)
	return out
}
