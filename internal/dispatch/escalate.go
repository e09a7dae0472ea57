package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/perfgate/perfgate/internal/report"
	"github.com/perfgate/perfgate/internal/store"
)

// Escalate turns every warned check whose deadline has passed into a
// blocking failure and says so on the PR. Deadlines live in the store, so a
// restarted server escalates on time; the warned→escalated transition is
// conditional, so of several replicas only one posts the comment.
func (s *Service) Escalate(ctx context.Context) error {
	due, err := s.st.DueCheckRuns(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, cr := range due {
		if open(cr.State) {
			// A retest is measuring the commit: its verdict decides, and a
			// regression it confirms meets this same, already past,
			// deadline on the next pass.
			continue
		}
		if cr.State != store.CheckWarned {
			// Resolved some other way: the clock no longer applies.
			if _, err := s.st.TransitionCheckRun(ctx, cr.ID, cr.State, store.CheckTransition{State: cr.State}); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		won, err := s.st.TransitionCheckRun(ctx, cr.ID, store.CheckWarned, store.CheckTransition{State: store.CheckEscalated})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !won {
			continue
		}
		cr.State = store.CheckEscalated
		if err := s.announceEscalation(ctx, cr); err != nil {
			// Put the warning and its clock back so the next pass tries
			// again; otherwise the regression would never block. One
			// failing repository must not hold up the others either.
			if _, rerr := s.st.TransitionCheckRun(ctx, cr.ID, store.CheckEscalated, store.CheckTransition{State: store.CheckWarned, Deadline: cr.Deadline}); rerr != nil {
				err = errors.Join(err, fmt.Errorf("restore warning: %w", rerr))
			}
			errs = append(errs, fmt.Errorf("escalate %s@%s %s: %w", cr.Repo, short(cr.HeadSHA), cr.Tier, err))
		}
	}
	return errors.Join(errs...)
}

func (s *Service) announceEscalation(ctx context.Context, cr store.CheckRun) error {
	var doc verdictDoc
	if len(cr.Verdict) > 0 {
		if err := json.Unmarshal(cr.Verdict, &doc); err != nil {
			return fmt.Errorf("decode stored verdict: %w", err)
		}
	}
	client, err := s.clients.NewInstallationClient(cr.InstallationID)
	if err != nil {
		return err
	}
	v := s.view(cr, doc)
	if err := s.render(ctx, client, cr, v); err != nil {
		return err
	}
	if cr.PRNumber > 0 {
		body, err := report.RenderComment(v)
		if err != nil {
			return err
		}
		owner, repo, _ := strings.Cut(cr.Repo, "/")
		if _, _, err := client.Issues.CreateComment(ctx, owner, repo, cr.PRNumber, &github.IssueComment{Body: github.String(body)}); err != nil {
			return fmt.Errorf("post escalation comment: %w", err)
		}
	}
	s.audit(ctx, "perfgate", "regression.escalated", cr.Repo, cr.PRNumber, map[string]any{"sha": cr.HeadSHA, "tier": cr.Tier})
	return nil
}

// RunEscalations calls Escalate every interval until ctx ends.
func (s *Service) RunEscalations(ctx context.Context, every time.Duration) {
	s.every(ctx, every, "escalation pass", s.Escalate)
}

// every runs fn now and then at each tick until ctx ends, logging errors.
func (s *Service) every(ctx context.Context, d time.Duration, what string, fn func(context.Context) error) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		if err := fn(ctx); err != nil && ctx.Err() == nil {
			s.log.Error().Err(err).Msg(what)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
