package app

import (
	"context"
	"fmt"

	"github.com/palantir/go-githubapp/githubapp"
	"github.com/perfgate/perfgate/internal/vocab/request"
)

// releaseHandler passes published releases on for baseline promotion.
type releaseHandler struct{ *base }

func (h *releaseHandler) Handles() []string { return []string{"release"} }

func (h *releaseHandler) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var ev releaseEvent
	if err := parse(eventType, payload, &ev); err != nil {
		return err
	}
	if ev.Action != "published" {
		return nil
	}
	installationID := ev.installationID()
	ctx, log := githubapp.PrepareRepoContext(ctx, installationID, ev.Repository.github())
	rel := request.Release{
		InstallationID: installationID, Owner: ev.Repository.Owner.Login, Repo: ev.Repository.Name,
		Tag: ev.Release.TagName, TargetCommit: ev.Release.TargetCommitish, By: ev.Sender.Login,
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
