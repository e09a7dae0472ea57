package app

import (
	"context"
	"fmt"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"
	"github.com/perfgate/perfgate/internal/request"
)

// releaseHandler passes published releases on for baseline promotion.
type releaseHandler struct{ *base }

func (h *releaseHandler) Handles() []string { return []string{"release"} }

func (h *releaseHandler) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var ev github.ReleaseEvent
	if err := parse(eventType, payload, &ev); err != nil {
		return err
	}
	if ev.GetAction() != "published" {
		return nil
	}
	installationID := githubapp.GetInstallationIDFromEvent(&ev)
	ctx, log := githubapp.PrepareRepoContext(ctx, installationID, ev.GetRepo())
	rel := request.Release{
		InstallationID: installationID, Owner: ev.GetRepo().GetOwner().GetLogin(), Repo: ev.GetRepo().GetName(),
		Tag: ev.GetRelease().GetTagName(), TargetCommit: ev.GetRelease().GetTargetCommitish(), By: ev.GetSender().GetLogin(),
	}
	log.Info().Str("tag", rel.Tag).Str("target", rel.TargetCommit).Msg("release published")
	if h.deps.Releases == nil {
		return nil
	}
	if err := h.deps.Releases.ReleasePublished(ctx, rel); err != nil {
		return fmt.Errorf("release %s of %s/%s: %w", rel.Tag, rel.Owner, rel.Repo, err)
	}
	return nil
}
