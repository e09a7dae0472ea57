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
			m.add(r)
		}
	}
	out := make([]UsageRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	sortUsage(out)
	return out
}

// add sums o's measures into r: every measure a usage row has, in one
// place, so a new one cannot be left out of a merge.
func (r *UsageRow) add(o UsageRow) {
	r.GPUHours += o.GPUHours
	r.Jobs += o.Jobs
	r.BaselineReuse += o.BaselineReuse
	r.Regressions += o.Regressions
	r.RegressionUSDMonth += o.RegressionUSDMonth
}

// sortUsage orders usage rows newest week first, then by repository and
// tier.
func sortUsage(out []UsageRow) {
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
}
