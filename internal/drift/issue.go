package drift

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/go-github/v62/github"

	"github.com/perfgate/perfgate/internal/store"
)

// marker identifies a record's issue; it survives a crash between opening
// the issue and storing its number.
func marker(id int64) string { return fmt.Sprintf("<!-- perfgate:change-point id=%d -->", id) }

// issue opens the record's issue, or edits it when the change point
// moved. Change points of one repository that start at the same commit
// (one slow commit moves many metrics and cells) share one issue that
// lists them all.
func (p *Pass) issue(ctx context.Context, rec *store.ChangePointRecord, changed bool) (opened, updated bool, err error) {
	if rec.IssueNumber != 0 && !changed {
		return false, false, nil
	}
	group, err := p.group(ctx, *rec)
	if err != nil {
		return false, false, err
	}
	num, url := rec.IssueNumber, rec.IssueURL
	for _, g := range group {
		if num == 0 && g.IssueNumber != 0 {
			num, url = g.IssueNumber, g.IssueURL
		}
	}
	client, err := p.client(ctx, *rec)
	if err != nil {
		return false, false, err
	}
	owner, name, _ := strings.Cut(rec.Repo, "/")
	if num == 0 {
		if num, url, err = p.findIssue(ctx, client, owner, name, group); err != nil {
			return false, false, err
		}
	}
	title, body := p.issueText(group)
	if num == 0 {
		is, _, err := client.Issues.Create(ctx, owner, name, &github.IssueRequest{Title: &title, Body: &body, Labels: &[]string{IssueLabel}})
		if err != nil {
			return false, false, fmt.Errorf("open issue: %w", err)
		}
		num, url, opened = is.GetNumber(), is.GetHTMLURL(), true
	} else {
		if _, _, err := client.Issues.Edit(ctx, owner, name, num, &github.IssueRequest{Title: &title, Body: &body}); err != nil {
			return false, false, fmt.Errorf("update issue #%d: %w", num, err)
		}
		updated = true
	}
	if rec.IssueNumber != num {
		rec.IssueNumber, rec.IssueURL = num, url
		stored, err := p.o.Store.PutChangePoint(ctx, *rec)
		if err != nil {
			return opened, updated, err
		}
		*rec = stored
	}
	return opened, updated, nil
}

// group is rec with the repository's other open regression change points
// that start at the same commit, by series.
func (p *Pass) group(ctx context.Context, rec store.ChangePointRecord) ([]store.ChangePointRecord, error) {
	all, err := p.o.Store.ListChangePoints(ctx, store.ChangePointFilter{Repo: rec.Repo, State: store.ChangePointOpen})
	if err != nil {
		return nil, err
	}
	out := []store.ChangePointRecord{}
	for _, c := range all {
		switch {
		case c.ID == rec.ID:
			out = append(out, rec)
		case c.Regression && rec.BadSHA != "" && c.BadSHA == rec.BadSHA:
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		out = append(out, rec)
	}
	return out, nil
}

// findIssue looks for an issue of this record among the label's issues.
func (p *Pass) findIssue(ctx context.Context, client *github.Client, owner, name string, group []store.ChangePointRecord) (int, string, error) {
	opts := &github.IssueListByRepoOptions{State: "all", Labels: []string{IssueLabel}, ListOptions: github.ListOptions{PerPage: 100}}
	for {
		issues, resp, err := client.Issues.ListByRepo(ctx, owner, name, opts)
		if err != nil {
			return 0, "", fmt.Errorf("list %s issues: %w", IssueLabel, err)
		}
		for _, is := range issues {
			for _, c := range group {
				if strings.Contains(is.GetBody(), marker(c.ID)) {
					return is.GetNumber(), is.GetHTMLURL(), nil
				}
			}
		}
		if resp.NextPage == 0 {
			return 0, "", nil
		}
		opts.Page = resp.NextPage
	}
}

func (p *Pass) client(ctx context.Context, rec store.ChangePointRecord) (*github.Client, error) {
	var inst int64
	for _, id := range []int64{rec.BadJobID, rec.GoodJobID} {
		if id == 0 {
			continue
		}
		if j, err := p.o.Store.GetJob(ctx, id); err == nil && j.InstallationID != 0 {
			inst = j.InstallationID
			break
		}
	}
	if inst == 0 && p.o.InstallationOf != nil {
		var err error
		if inst, err = p.o.InstallationOf(ctx, rec.Repo); err != nil {
			return nil, err
		}
	}
	if inst == 0 {
		return nil, fmt.Errorf("no installation of the app on %s is known: install it there, or the change point stays without an issue", rec.Repo)
	}
	return p.o.Clients.NewInstallationClient(inst)
}

func (p *Pass) issueText(group []store.ChangePointRecord) (title, body string) {
	first := group[0]
	title = fmt.Sprintf("perfgate: %s %s on %s since %s (%s..%s)", first.Metric, pct(first.Change), first.Key,
		first.Day.Format("2006-01-02"), short(first.GoodSHA), short(first.BadSHA))
	if len(group) > 1 {
		title += fmt.Sprintf(", and %d more", len(group)-1)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "perfgate's nightly change-point analysis found a **regression** on the default branch, starting at `%s` (%s); the last good commit is `%s` (%s).\n\n",
		first.BadSHA, first.Day.Format("2006-01-02"), first.GoodSHA, first.GoodDay.Format("2006-01-02"))
	fmt.Fprintf(&b, "Commit range: https://github.com/%s/compare/%s...%s\n\n", first.Repo, first.GoodSHA, first.BadSHA)
	fmt.Fprintf(&b, "| benchmark | metric | before (σ) | after (σ) | change | p-value | dashboard |\n|---|---|---|---|---|---|---|\n")
	for _, c := range group {
		link := ""
		if p.o.Links != nil {
			link = "[series](" + p.o.Links.SeriesURL(c.Repo, c.Key, c.Metric) + ")"
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %.4g (%.2g) | %.4g (%.2g) | **%s** | %.2g | %s |\n", c.Key, c.Metric, c.MeanBefore, c.StdBefore,
			c.MeanAfter, c.StdAfter, pct(c.Change), c.PValue, link)
	}
	fmt.Fprintf(&b, "\nMagnitudes are the change of the mean between the segments either side of the change point; the p-value is the two-sided t-test of those segments (E-divisive means, as Apache Otava).\n")
	fmt.Fprintf(&b, "To find the commit, bisect between `%s` (good) and `%s` (bad).\n", short(first.GoodSHA), short(first.BadSHA))
	fmt.Fprintf(&b, "perfgate updates this issue when later nights move the change point; it opens one issue per change point (change points at the same commit share it).\n\n")
	for _, c := range group {
		b.WriteString(marker(c.ID) + "\n")
	}
	return title, b.String()
}

func pct(f float64) string { return fmt.Sprintf("%+.1f%%", 100*f) }

func short(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}
