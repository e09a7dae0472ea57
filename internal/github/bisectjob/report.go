package bisectjob

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-github/v62/github"
	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/analysis/bisect"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/request"
)

// Clients gives an installation's GitHub client (go-githubapp's
// ClientCreator has this method).
type Clients interface {
	NewInstallationClient(installationID int64) (*github.Client, error)
}

// CommentReporter posts a finished bisect as a comment on the pull request
// or issue it was asked on: the culprit, the notes and the evidence table.
type CommentReporter struct {
	Clients Clients
}

// maxComment is GitHub's limit on a comment body, in characters.
const maxComment = 65536

// Report implements Reporter. A bisect with no PR or issue to report to
// (one a change point started before its issue existed) posts nothing:
// its result stays in the store.
func (c CommentReporter) Report(ctx context.Context, rec store.BisectRecord, s *bisect.State) error {
	if rec.Number == 0 {
		return nil
	}
	owner, name, ok := strings.Cut(rec.Repo, "/")
	if !ok {
		return fmt.Errorf("report bisect %d: repository %q is not owner/name", rec.ID, rec.Repo)
	}
	client, err := c.Clients.NewInstallationClient(rec.InstallationID)
	if err != nil {
		return fmt.Errorf("report bisect %d: GitHub client: %w", rec.ID, err)
	}
	body := Body(rec, s)
	if _, _, err := client.Issues.CreateComment(ctx, owner, name, rec.Number, &github.IssueComment{Body: &body}); err != nil {
		return fmt.Errorf("report bisect %d on %s#%d: %w", rec.ID, rec.Repo, rec.Number, err)
	}
	return nil
}

// Body is the comment that reports a finished bisect: the culprit, the
// notes, the evidence table and every run, and who asked.
func Body(rec store.BisectRecord, s *bisect.State) string {
	body := s.Markdown()
	if rec.RequestedBy != "" && !strings.Contains(rec.RequestedBy, "[bot]") && rec.ChangePointID == 0 {
		body += fmt.Sprintf("\nBisect asked for by @%s.\n", rec.RequestedBy)
	}
	return cut(body)
}

func cut(body string) string {
	if r := []rune(body); len(r) > maxComment {
		body = string(r[:maxComment-200]) + "\n\n… (cut at GitHub's comment limit; the whole bisect is in perfgate's store)\n"
	}
	return body
}

// Outbox queues GitHub writes (the dispatcher's outbox: each is sent and
// retried until GitHub confirms it, once per key).
type Outbox interface {
	Comment(ctx context.Context, c request.Comment) error
}

// OutboxReporter reports through the outbox: the finished bisect as a
// comment where it was asked for, and a bisect that stopped with the
// reason. Each bisect's comment has its own key, so a report retried
// after a crash is posted once.
type OutboxReporter struct {
	Outbox Outbox
	// Clients, when set, finds the culprit's pull request on GitHub when
	// its commit message does not name one.
	Clients Clients
}

// Report implements Reporter.
func (o OutboxReporter) Report(ctx context.Context, rec store.BisectRecord, s *bisect.State) error {
	o.culpritPR(ctx, rec, s)
	return o.post(ctx, rec, "result", Body(rec, s))
}

// culpritPR names the culprit's pull request from GitHub's list of the
// pull requests a commit belongs to (a merged one first), when the
// commit's message names none. Without it the report still goes out.
func (o OutboxReporter) culpritPR(ctx context.Context, rec store.BisectRecord, s *bisect.State) {
	r := s.Result
	if o.Clients == nil || r == nil || r.Culprit == nil || r.Culprit.PR != 0 {
		return
	}
	log := zerolog.Ctx(ctx).With().Int64("bisect", rec.ID).Str("culprit", r.Culprit.SHA).Logger()
	owner, name, ok := strings.Cut(rec.Repo, "/")
	client, err := o.Clients.NewInstallationClient(rec.InstallationID)
	if !ok || err != nil {
		log.Warn().Err(err).Msg("culprit's pull request not looked up")
		return
	}
	prs, _, err := client.PullRequests.ListPullRequestsWithCommit(ctx, owner, name, r.Culprit.SHA, nil)
	if err != nil {
		log.Warn().Err(err).Msg("culprit's pull request not looked up")
		return
	}
	pr := 0
	for _, p := range prs {
		if pr == 0 || (p.MergedAt != nil && p.GetNumber() != 0) {
			pr = p.GetNumber()
			if p.MergedAt != nil {
				break
			}
		}
	}
	if pr == 0 {
		return
	}
	r.Culprit.PR = pr
	for i := range s.Commits {
		if s.Commits[i].SHA == r.Culprit.SHA {
			s.Commits[i].PR = pr
		}
	}
}

// ReportStopped implements StopReporter.
func (o OutboxReporter) ReportStopped(ctx context.Context, rec store.BisectRecord, cause error) error {
	if gone := (*CardGoneError)(nil); errors.As(cause, &gone) {
		return o.post(ctx, rec, "stopped", cardGoneBody(rec, gone))
	}
	body := fmt.Sprintf("### perfgate bisect stopped: %s, %.7s..%.7s\n\nThe bisect could not go on: %v.\n\n", rec.Metric, rec.GoodSHA, rec.BadSHA, cause)
	if s, err := bisect.Load(rec.State); err == nil {
		body += s.Markdown()
	}
	if rec.RequestedBy != "" && rec.ChangePointID == 0 {
		body += fmt.Sprintf("\nBisect asked for by @%s; fix the cause and ask again with `/perf bisect %.7s %.7s`.\n", rec.RequestedBy, rec.GoodSHA, rec.BadSHA)
	}
	return o.post(ctx, rec, "stopped", cut(body))
}

func (o OutboxReporter) post(ctx context.Context, rec store.BisectRecord, what, body string) error {
	if rec.Number == 0 {
		return nil
	}
	owner, name, ok := strings.Cut(rec.Repo, "/")
	if !ok {
		return fmt.Errorf("report bisect %d: repository %q is not owner/name", rec.ID, rec.Repo)
	}
	return o.Outbox.Comment(ctx, request.Comment{Key: fmt.Sprintf("bisect:%d:%s", rec.ID, what), InstallationID: rec.InstallationID,
		Owner: owner, Repo: name, Number: rec.Number, Body: body})
}
