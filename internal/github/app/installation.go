package app

import (
	"context"

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
		var ev installationEvent
		if err := parse(eventType, payload, &ev); err != nil {
			return err
		}
		names := make([]string, 0, len(ev.Repositories))
		for _, r := range ev.Repositories {
			names = append(names, r.FullName)
		}
		log.Info().Str("action", ev.Action).Int64("installation_id", ev.installationID()).
			Str("account", ev.Installation.Account.Login).Strs("repositories", names).
			Str("by", ev.Sender.Login).Msg("installation event")
	case "installation_repositories":
		var ev installationRepositoriesEvent
		if err := parse(eventType, payload, &ev); err != nil {
			return err
		}
		var added, removed []string
		for _, r := range ev.RepositoriesAdded {
			added = append(added, r.FullName)
		}
		for _, r := range ev.RepositoriesRemoved {
			removed = append(removed, r.FullName)
		}
		log.Info().Str("action", ev.Action).Int64("installation_id", ev.installationID()).
			Strs("added", added).Strs("removed", removed).Msg("installation repositories changed")
	}
	return nil
}
