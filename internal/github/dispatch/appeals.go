package dispatch

import (
	"context"
	"fmt"

	"github.com/perfgate/perfgate/internal/github/checkstate"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/request"
)

// commandsStore is what the maintainers' commands (appeals.go, trust.go:
// appeals, approvals, acknowledgements) use.
type commandsStore interface {
	CreateAppeal(ctx context.Context, a store.Appeal) (store.Appeal, error)
	DecideAppeal(ctx context.Context, id int64, status store.AppealStatus, decidedBy string) (store.Appeal, error)
	ListAppeals(ctx context.Context, repo string, pr int) ([]store.Appeal, error)
	ApproveCommit(ctx context.Context, a store.Approval) (store.Approval, bool, error)
	GetApproval(ctx context.Context, repo, sha string) (store.Approval, error)
	GetCheckRunByID(ctx context.Context, id int64) (store.CheckRun, error)
	ListCheckRuns(ctx context.Context, repo string, pr int) ([]store.CheckRun, error)
}

// Open implements app.Appeals: the reason is recorded (the app posts it on
// the PR and queues the confirming retest).
func (s *Service) Open(ctx context.Context, a request.Appeal) error {
	repo := a.Owner + "/" + a.Repo
	if _, err := s.commanding().CreateAppeal(ctx, store.Appeal{Repo: repo, PRNumber: a.PR, HeadSHA: a.HeadSHA, Author: a.By, Reason: a.Reason, Status: store.AppealOpen}); err != nil {
		return err
	}
	s.audit(ctx, a.By, "appeal.opened", repo, a.PR, map[string]any{"sha": a.HeadSHA, "reason": a.Reason, "comment": a.CommentURL})
	return nil
}

// acceptedNotePrefix starts the note an accepted appeal adds to a verdict.
const acceptedNotePrefix = "accepted on appeal by "

// Decide implements app.Appeals. Accepting records the regression as
// accepted and turns the check green; the baseline does not move. Rejecting
// leaves the warning and its clock as they are.
func (s *Service) Decide(ctx context.Context, d request.Decision) error {
	repo := d.Owner + "/" + d.Repo
	appeals, err := s.commanding().ListAppeals(ctx, repo, d.PR)
	if err != nil {
		return err
	}
	var open *store.Appeal
	for i := len(appeals) - 1; i >= 0; i-- {
		if appeals[i].Status == store.AppealOpen {
			open = &appeals[i]
			break
		}
	}
	if open == nil {
		return request.ErrNoOpenAppeal
	}
	status, action := store.AppealRejected, "appeal.rejected"
	if d.Accept {
		status, action = store.AppealAccepted, "appeal.accepted"
	}
	if _, err := s.commanding().DecideAppeal(ctx, open.ID, status, d.By); err != nil {
		return err
	}
	s.audit(ctx, d.By, action, repo, d.PR, map[string]any{"appeal_id": open.ID, "sha": d.HeadSHA, "reason": d.Reason, "comment": d.CommentURL})
	if !d.Accept {
		return nil
	}
	note := fmt.Sprintf(acceptedNotePrefix+"@%s: %s", d.By, open.Reason)
	return s.eachRow(ctx, repo, d.PR, func(cr store.CheckRun) bool {
		return cr.HeadSHA == d.HeadSHA && (cr.State == store.CheckWarned || cr.State == store.CheckEscalated)
	}, step{
		ev: checkstate.Event{Kind: checkstate.AppealAccepted},
		// Keep the note, so a re-run that confirms the accepted regression
		// still shows who accepted it and why.
		docFor: func(doc verdictDoc) verdictDoc { doc.Notes = append(doc.Notes, note); return doc },
	})
}

// acceptedAppeals returns the accepted-appeal notes of the check's commit:
// an appeal accepted while its retest still ran (the row was not warned
// then) must still hold when that retest confirms the regression.
func (s *Service) acceptedAppeals(ctx context.Context, cr store.CheckRun) []string {
	if cr.PRNumber == 0 {
		return nil
	}
	appeals, err := s.commanding().ListAppeals(ctx, cr.Repo, cr.PRNumber)
	if err != nil {
		s.log.Error().Err(err).Str("repo", cr.Repo).Int("pr", cr.PRNumber).Msg("list appeals")
		return nil
	}
	var notes []string
	for _, a := range appeals {
		if a.HeadSHA == cr.HeadSHA && a.Status == store.AppealAccepted {
			notes = append(notes, fmt.Sprintf(acceptedNotePrefix+"@%s: %s", a.DecidedBy, a.Reason))
		}
	}
	return notes
}
