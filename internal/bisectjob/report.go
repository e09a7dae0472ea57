package bisectjob

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/go-github/v62/github"

	"github.com/perfgate/perfgate/internal/bisect"
	"github.com/perfgate/perfgate/internal/store"
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
	body := s.Markdown()
	if rec.RequestedBy != "" && !strings.Contains(rec.RequestedBy, "[bot]") && rec.ChangePointID == 0 {
		body += fmt.Sprintf("\nBisect asked for by @%s.\n", rec.RequestedBy)
	}
	if r := []rune(body); len(r) > maxComment {
		body = string(r[:maxComment-200]) + "\n\n… (cut at GitHub's comment limit; the whole bisect is in perfgate's store)\n"
	}
	if _, _, err := client.Issues.CreateComment(ctx, owner, name, rec.Number, &github.IssueComment{Body: &body}); err != nil {
		return fmt.Errorf("report bisect %d on %s#%d: %w", rec.ID, rec.Repo, rec.Number, err)
	}
	return nil
}
