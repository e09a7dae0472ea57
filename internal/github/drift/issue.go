package drift

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/go-github/v62/github"

	"github.com/perfgate/perfgate/internal/analysis/drift"
)

// issue opens the event's issue — after looking for one that carries a
// member's marker (a crash between opening it and storing its number) —
// or edits it when a member moved, joined or left this pass.
func (p *Pass) issue(ctx context.Context, e *drift.Event) (opened, updated bool, err error) {
	if e.Issue != 0 && !e.Touched {
		return false, false, nil
	}
	lead := e.Leader()
	client, err := p.client(ctx, lead)
	if err != nil {
		return false, false, err
	}
	owner, name, _ := strings.Cut(lead.Repo, "/")
	if e.Issue == 0 {
		if e.Issue, e.URL, err = p.findIssue(ctx, client, owner, name, e.Members); err != nil {
			return false, false, err
		}
	}
	title, body := drift.IssueText(e, p.o.Links)
	if e.Issue == 0 {
		is, _, err := client.Issues.Create(ctx, owner, name, &github.IssueRequest{Title: &title, Body: &body, Labels: &[]string{IssueLabel}})
		if err != nil {
			return false, false, fmt.Errorf("open issue: %w", err)
		}
		e.Issue, e.URL = is.GetNumber(), is.GetHTMLURL()
		return true, false, nil
	}
	if _, _, err := client.Issues.Edit(ctx, owner, name, e.Issue, &github.IssueRequest{Title: &title, Body: &body}); err != nil {
		return false, false, fmt.Errorf("update issue #%d: %w", e.Issue, err)
	}
	return false, true, nil
}

// retractIssue says on the issue that its change points are gone and
// closes it.
func (p *Pass) retractIssue(ctx context.Context, rt drift.Retraction) error {
	first := rt.Members[0]
	client, err := p.client(ctx, first)
	if err != nil {
		return err
	}
	owner, name, _ := strings.Cut(first.Repo, "/")
	body := drift.RetractComment(rt, p.o.Now())
	if _, _, err := client.Issues.CreateComment(ctx, owner, name, rt.Issue, &github.IssueComment{Body: &body}); err != nil {
		return fmt.Errorf("comment: %w", err)
	}
	closed, reason := "closed", "not_planned"
	if _, _, err := client.Issues.Edit(ctx, owner, name, rt.Issue, &github.IssueRequest{State: &closed, StateReason: &reason}); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	return nil
}

// findIssue looks for an issue of this record among the label's issues.
func (p *Pass) findIssue(ctx context.Context, client *github.Client, owner, name string, group []drift.ChangePoint) (int, string, error) {
	opts := &github.IssueListByRepoOptions{State: "all", Labels: []string{IssueLabel}, ListOptions: github.ListOptions{PerPage: 100}}
	for {
		issues, resp, err := client.Issues.ListByRepo(ctx, owner, name, opts)
		if err != nil {
			return 0, "", fmt.Errorf("list %s issues: %w", IssueLabel, err)
		}
		for _, is := range issues {
			for _, c := range group {
				if strings.Contains(is.GetBody(), drift.Marker(c.ID)) {
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

func (p *Pass) client(ctx context.Context, rec drift.ChangePoint) (*github.Client, error) {
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
