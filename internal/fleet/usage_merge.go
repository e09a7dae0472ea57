package fleet

import "sort"

// MergeUsage adds up rows of the same repository, tier and week from
// several sums (GPU time and jobs summed by the database, reuses,
// regressions) and sorts them as Usage does.
func MergeUsage(parts ...[]UsageRow) []UsageRow {
	type key struct{ repo, tier, week string }
	rows := map[key]*UsageRow{}
	for _, part := range parts {
		for _, r := range part {
			k := key{r.Repo, r.Tier, r.Week}
			m, ok := rows[k]
			if !ok {
				m = &UsageRow{Repo: r.Repo, Tier: r.Tier, Week: r.Week, WeekStart: r.WeekStart}
				rows[k] = m
			}
			m.GPUHours += r.GPUHours
			m.Jobs += r.Jobs
			m.BaselineReuse += r.BaselineReuse
			m.Regressions += r.Regressions
			m.RegressionUSDMonth += r.RegressionUSDMonth
		}
	}
	out := make([]UsageRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Week != b.Week {
			return a.Week > b.Week
		}
		if a.Repo != b.Repo {
			return a.Repo < b.Repo
		}
		return a.Tier < b.Tier
	})
	return out
}
