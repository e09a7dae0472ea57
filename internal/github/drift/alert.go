package drift

import (
	"context"
	"errors"
	"fmt"

	"github.com/perfgate/perfgate/internal/analysis/drift"
	"github.com/perfgate/perfgate/internal/store"
)

// alerts tells the repository's events (drift.Events: one step, one
// event): an issue (opened, or edited when a steady member moved, joined
// or left), one Slack message per event, the bisect hook for its leader;
// and retracts the issues whose change points all went.
func (p *Pass) alerts(ctx context.Context, repo string, r *run) error {
	stored, err := p.o.Store.ListChangePoints(ctx, store.ChangePointFilter{Repo: repo})
	if err != nil {
		return err
	}
	all := changePoints(stored)
	events, riding := drift.Events(all)
	r.sum.Riding += len(riding)
	drift.Touch(events, all, r.touched)
	for _, e := range events {
		if price, ok := p.price(ctx, e.Leader()); ok {
			e.Price(price)
		}
	}
	total := drift.OpenTotal(events)
	var errs []error
	for _, e := range events {
		r.sum.Events++
		if err := p.tell(ctx, e, total, r.sum); err != nil {
			errs = append(errs, err)
		}
	}
	// After the events are told: an issue opened for one of them is live.
	if err := p.retract(ctx, drift.Retractions(all, events), r.sum); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// tell opens or updates the event's issue, posts its one Slack message
// (total is what the repository's open events cost together), and calls
// the bisect hook with its leader.
func (p *Pass) tell(ctx context.Context, e *drift.Event, total string, sum *Summary) error {
	var errs []error
	if p.o.Config.Issues == nil || *p.o.Config.Issues {
		opened, updated, err := p.issue(ctx, e)
		if err != nil {
			errs = append(errs, fmt.Errorf("issue for change point %d: %w", e.Leader().ID, err))
		}
		if opened {
			sum.IssuesOpened++
		}
		if updated {
			sum.IssuesUpdated++
		}
	}
	sent := drift.SlackSent(e.Members)
	if url := p.slackURL(e.Leader().Repo); url != "" && !sent {
		if err := p.post(ctx, url, drift.SlackText(e, total, p.o.Links)); err != nil {
			errs = append(errs, fmt.Errorf("slack for change point %d: %w", e.Leader().ID, err))
		} else {
			sum.SlackSent++
			sent = true
		}
	}
	// Every member carries the event's issue and whether it was told, so
	// a member that joins later is not told again.
	for i, m := range e.Members {
		if m.IssueNumber == e.Issue && m.IssueURL == e.URL && m.SlackSent == sent {
			continue
		}
		m.IssueNumber, m.IssueURL, m.SlackSent = e.Issue, e.URL, sent
		stored, err := p.o.Store.PutChangePoint(ctx, store.ChangePointRecord(m))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		e.Members[i] = drift.ChangePoint(stored)
	}
	if p.o.Regressed != nil && (e.Issue != 0 || p.o.Config.Issues != nil && !*p.o.Config.Issues) {
		if err := p.o.Regressed(ctx, store.ChangePointRecord(e.Leader())); err != nil {
			errs = append(errs, fmt.Errorf("after change point %d: %w", e.Leader().ID, err))
		}
	}
	return errors.Join(errs...)
}

// retract closes, once, each issue none of whose change points is still
// found: a comment says why, and Slack hears it when it heard the alert.
func (p *Pass) retract(ctx context.Context, rs []drift.Retraction, sum *Summary) error {
	var errs []error
	for _, rt := range rs {
		if err := p.retractIssue(ctx, rt); err != nil {
			errs = append(errs, fmt.Errorf("retract issue #%d: %w", rt.Issue, err))
			continue
		}
		sum.Retracted++
		if url := p.slackURL(rt.Members[0].Repo); url != "" && drift.SlackSent(rt.Members) {
			if err := p.post(ctx, url, drift.RetractSlack(rt)); err != nil {
				errs = append(errs, fmt.Errorf("slack retraction of issue #%d: %w", rt.Issue, err))
			} else {
				sum.SlackSent++
			}
		}
		for _, c := range rt.Members {
			c.State = drift.Retracted
			if _, err := p.o.Store.PutChangePoint(ctx, store.ChangePointRecord(c)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
