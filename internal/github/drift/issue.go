package drift

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/go-github/v62/github"

	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/figure"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// marker identifies a record's issue; it survives a crash between opening
// the issue and storing its number.
func marker(id int64) string { return fmt.Sprintf("<!-- perfgate:change-point id=%d -->", id) }

// issue opens the event's issue — after looking for one that carries a
// member's marker (a crash between opening it and storing its number) —
// or edits it when a member moved, joined or left this pass.
func (p *Pass) issue(ctx context.Context, e *event) (opened, updated bool, err error) {
	if e.issue != 0 && !e.touched {
		return false, false, nil
	}
	lead := e.leader()
	client, err := p.client(ctx, lead)
	if err != nil {
		return false, false, err
	}
	owner, name, _ := strings.Cut(lead.Repo, "/")
	if e.issue == 0 {
		if e.issue, e.url, err = p.findIssue(ctx, client, owner, name, e.members); err != nil {
			return false, false, err
		}
	}
	title, body := p.issueText(e)
	if e.issue == 0 {
		is, _, err := client.Issues.Create(ctx, owner, name, &github.IssueRequest{Title: &title, Body: &body, Labels: &[]string{IssueLabel}})
		if err != nil {
			return false, false, fmt.Errorf("open issue: %w", err)
		}
		e.issue, e.url = is.GetNumber(), is.GetHTMLURL()
		return true, false, nil
	}
	if _, _, err := client.Issues.Edit(ctx, owner, name, e.issue, &github.IssueRequest{Title: &title, Body: &body}); err != nil {
		return false, false, fmt.Errorf("update issue #%d: %w", e.issue, err)
	}
	return false, true, nil
}

// retractIssue says on the issue that its change points are gone and
// closes it.
func (p *Pass) retractIssue(ctx context.Context, num int, recs []store.ChangePointRecord) error {
	client, err := p.client(ctx, recs[0])
	if err != nil {
		return err
	}
	owner, name, _ := strings.Cut(recs[0].Repo, "/")
	body := fmt.Sprintf("**Retracted.** perfgate's nightly analysis of %s no longer finds the change point%s this issue reported (%s): "+
		"the series is back at its earlier level — a slow night, or nights re-measured — so there is no regression to find. Closing; "+
		"a step that comes back opens a new issue.", p.o.Now().UTC().Format("2006-01-02"), plural(len(recs)), memberList(recs, 4))
	if _, _, err := client.Issues.CreateComment(ctx, owner, name, num, &github.IssueComment{Body: &body}); err != nil {
		return fmt.Errorf("comment: %w", err)
	}
	closed, reason := "closed", "not_planned"
	if _, _, err := client.Issues.Edit(ctx, owner, name, num, &github.IssueRequest{State: &closed, StateReason: &reason}); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	return nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// memberList words up to n change points: "`tpot_median` on `nightly/c=1`
// +8%, … and 3 more".
func memberList(recs []store.ChangePointRecord, n int) string {
	var parts []string
	for i, c := range recs {
		if i == n {
			parts = append(parts, fmt.Sprintf("and %d more", len(recs)-n))
			break
		}
		parts = append(parts, fmt.Sprintf("`%s` on `%s` %s", c.Metric, c.Key, pct(c.Change)))
	}
	return strings.Join(parts, ", ")
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

// issueText is the event's issue: the leader in the title, a digest (how
// many change points, metrics and cells), the table of members with
// which lead and which ride along, and the markers.
func (p *Pass) issueText(e *event) (title, body string) {
	first := e.leader()
	metrics, cells := map[string]bool{}, map[string]bool{}
	for _, c := range e.members {
		metrics[c.Metric], cells[c.Key] = true, true
	}
	title = fmt.Sprintf("perfgate: %s %s on %s since %s (%s..%s)", first.Metric, pct(first.Change), first.Key,
		first.Day.Format("2006-01-02"), rev.Short(first.GoodSHA), rev.Short(first.BadSHA))
	if len(e.members) > 1 {
		title += fmt.Sprintf(", and %d more", len(e.members)-1)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "perfgate's nightly change-point analysis found a **regression** on the default branch, starting at `%s` (%s); the last good commit is `%s` (%s).\n\n",
		first.BadSHA, first.Day.Format("2006-01-02"), first.GoodSHA, first.GoodDay.Format("2006-01-02"))
	fmt.Fprintf(&b, "**Digest:** one step, %d change point%s across %d metric%s and %d matrix cell%s; led by `%s` on `%s` (%s, %.0f× its night-to-night noise).\n\n",
		len(e.members), plural(len(e.members)), len(metrics), plural(len(metrics)), len(cells), plural(len(cells)),
		first.Metric, first.Key, pct(first.Change), Effect(first))
	if line := costLine(e); line != "" {
		b.WriteString(line + "\n\n")
	}
	fmt.Fprintf(&b, "Commit range: https://github.com/%s/compare/%s...%s\n\n", first.Repo, first.GoodSHA, first.BadSHA)
	fmt.Fprintf(&b, "| benchmark | metric | since | before (σ) | after (σ) | change | noise | dashboard |\n|---|---|---|---|---|---|---|---|\n")
	for _, c := range e.members {
		link := ""
		if p.o.Links != nil {
			link = "[series](" + p.o.Links.SeriesURL(c.Repo, c.Key, c.Metric) + ")"
		}
		role := fmt.Sprintf("%.1f%% (leads)", 100*Noise(c))
		if !Leads(c) {
			role = fmt.Sprintf("%.1f%% (noisy: rides along)", 100*Noise(c))
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s | %.4g (%.2g) | %.4g (%.2g) | **%s** | %s | %s |\n", c.Key, c.Metric, c.Day.Format("01-02"),
			c.MeanBefore, c.StdBefore, c.MeanAfter, c.StdAfter, pct(c.Change), role, link)
	}
	fmt.Fprintf(&b, "\nMagnitudes are the change of the mean between the segments either side of the change point (E-divisive means, as Apache Otava), confirmed by at least %d nights on each side. ", ConfirmNights)
	fmt.Fprintf(&b, "A metric whose change is under %d× its own night-to-night noise does not open an issue on its own; it is listed here when it moved with this step.\n", LeadEffect)
	fmt.Fprintf(&b, "To find the commit, bisect between `%s` (good) and `%s` (bad).\n", rev.Short(first.GoodSHA), rev.Short(first.BadSHA))
	fmt.Fprintf(&b, "perfgate edits this issue only when a steady metric's change point joins, leaves or moves by %.1f points or more (noisy ones are written in then; the dashboard shows them live), and closes it as retracted if the step disappears.\n\n", 100*MaterialChange)
	for _, c := range e.members {
		b.WriteString(marker(c.ID) + "\n")
	}
	return title, b.String()
}

// pct is a change point's change as the dashboard prints the same record
// (figure.Change: "−10.0%"), so the digest and the pages read one way.
func pct(f float64) string { return figure.Change(f) }
