package app

import (
	"context"

	"github.com/google/go-github/v62/github"
	"github.com/rs/zerolog"
)

// installationHandler logs installs and repository selection changes; the
// app needs no state for them because every event names its installation.
type installationHandler struct{ *base }

func (h *installationHandler) Handles() []string {
	return []string{"installation", "installation_repositories"}
}

func (h *installationHandler) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	log := zerolog.Ctx(ctx)
	switch eventType {
	case "installation":
		var ev github.InstallationEvent
		if err := parse(eventType, payload, &ev); err != nil {
			return err
		}
		names := make([]string, 0, len(ev.Repositories))
		for _, r := range ev.Repositories {
			names = append(names, r.GetFullName())
		}
		log.Info().Str("action", ev.GetAction()).Int64("installation_id", ev.GetInstallation().GetID()).
			Str("account", ev.GetInstallation().GetAccount().GetLogin()).Strs("repositories", names).
			Str("by", ev.GetSender().GetLogin()).Msg("installation event")
	case "installation_repositories":
		var ev github.InstallationRepositoriesEvent
		if err := parse(eventType, payload, &ev); err != nil {
			return err
		}
		var added, removed []string
		for _, r := range ev.RepositoriesAdded {
			added = append(added, r.GetFullName())
		}
		for _, r := range ev.RepositoriesRemoved {
			removed = append(removed, r.GetFullName())
		}
		log.Info().Str("action", ev.GetAction()).Int64("installation_id", ev.GetInstallation().GetID()).
			Strs("added", added).Strs("removed", removed).Msg("installation repositories changed")
	}
	return nil
}
