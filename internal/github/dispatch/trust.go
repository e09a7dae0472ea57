package dispatch

import (
	"context"
	"errors"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/checkstate"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/request"
)

// Approve implements app.Approvals: the approval of one fork commit is
// stored with its audit entry.
func (s *Service) Approve(ctx context.Context, a request.Approval) error {
	_, _, err := s.commanding().ApproveCommit(ctx, store.Approval{Repo: a.Owner + "/" + a.Repo, HeadSHA: a.HeadSHA, PRNumber: a.PR, By: a.By, Role: a.Role, Via: a.Via})
	return err
}

// Approved implements app.Approvals.
func (s *Service) Approved(ctx context.Context, repo, sha string) (bool, error) {
	_, err := s.commanding().GetApproval(ctx, repo, sha)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Heads implements app.HeadHistory: the commits perfgate recorded a check
// of for the pull request, each with when it first did. A `/perf approve`
// prefix is taken only when it names exactly one of them.
func (s *Service) Heads(ctx context.Context, repo string, pr int) ([]request.SeenHead, error) {
	runs, err := s.commanding().ListCheckRuns(ctx, repo, pr)
	if err != nil {
		return nil, err
	}
	first := map[string]int{}
	var out []request.SeenHead
	for _, cr := range runs {
		i, ok := first[cr.HeadSHA]
		if !ok {
			first[cr.HeadSHA] = len(out)
			out = append(out, request.SeenHead{SHA: cr.HeadSHA, First: cr.CreatedAt})
			continue
		}
		if cr.CreatedAt.Before(out[i].First) {
			out[i].First = cr.CreatedAt
		}
	}
	return out, nil
}

// Ack implements app.Acks: every check of the pull request that its tier
// holds as inconclusive (needs_ack) passes as inconclusive, with an audit
// entry naming the maintainer — the head commit's, and a merge queue's
// check of a merge group made from the pull request (another SHA).
func (s *Service) Ack(ctx context.Context, a request.Ack) ([]check.Tier, error) {
	repo := a.Owner + "/" + a.Repo
	runs, err := s.commanding().ListCheckRuns(ctx, repo, a.PR)
	if err != nil {
		return nil, err
	}
	var tiers []check.Tier
	for _, cr := range runs {
		if cr.State != string(check.NeedsAck) {
			continue
		}
		note := fmt.Sprintf("%s@%s: the inconclusive result passes", acknowledgedNotePrefix, a.By)
		if a.Reason != "" {
			note += ": " + a.Reason
		}
		applied := false
		err := s.retryCAS(ctx, func() (bool, error) {
			cur, err := s.commanding().GetCheckRunByID(ctx, cr.ID)
			if err != nil {
				return false, err
			}
			_, ok, err := s.apply(ctx, cur, step{
				ev:     checkstate.Event{Kind: checkstate.Acked},
				docFor: func(doc verdictDoc) verdictDoc { doc.Notes = append(doc.Notes, note); return doc },
				actor:  a.By,
				detail: map[string]any{"reason": a.Reason, "comment": a.CommentURL},
			})
			if errors.Is(err, errIgnored) {
				return true, nil // acknowledged by someone else, or re-run meanwhile
			}
			applied = ok
			return ok, err
		})
		if err != nil {
			return tiers, err
		}
		if applied {
			tiers = append(tiers, check.Tier(cr.Tier))
			if cr.HeadSHA != a.HeadSHA {
				zerolog.Ctx(ctx).Info().Str("sha", cr.HeadSHA).Str("tier", cr.Tier).Msg("acknowledged the check of a merge group of the pull request")
			}
		}
	}
	return tiers, nil
}

// acknowledgedNotePrefix starts the note a maintainer's `/perf ack` adds.
const acknowledgedNotePrefix = "acknowledged by "
