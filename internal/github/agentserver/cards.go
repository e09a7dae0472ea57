package agentserver

import (
	"fmt"
	"slices"

	"github.com/perfgate/perfgate/internal/analysis/fleet"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
)

// maxCardMiB bounds a card's reported memory: 16 TiB, far beyond any GPU.
const maxCardMiB = 16 << 20

// checkCards says what is wrong with the cards a registration reports, or
// "": each names one of the agent's GPUs, once.
func checkCards(req agentapi.RegisterRequest) string {
	if len(req.Cards) > agentapi.MaxCards {
		return fmt.Sprintf("%d cards reported: at most %d per agent (run one agent per card)", len(req.Cards), agentapi.MaxCards)
	}
	seen := map[string]bool{}
	for i, c := range req.Cards {
		switch {
		case c.UUID == "":
			return fmt.Sprintf("card %d has no uuid", i)
		case seen[c.UUID]:
			return fmt.Sprintf("card %s reported twice", c.UUID)
		case !slices.Contains(req.GPUUUIDs, c.UUID):
			return fmt.Sprintf("card %s is not among gpu_uuids %v: report the cards the agent uses", c.UUID, req.GPUUUIDs)
		case len(c.Model) > 200 || len(c.Driver) > 100 || c.MemoryMiB < 0 || c.MemoryMiB > maxCardMiB:
			return fmt.Sprintf("card %s: model, driver or memory out of range", c.UUID)
		}
		seen[c.UUID] = true
	}
	return ""
}

// withCardLabels is the agent's own labels plus those its cards give
// (model, memory, driver), each once.
func withCardLabels(labels []string, cards []fleet.Card) []string {
	out := slices.Clone(labels)
	for _, l := range fleet.CardLabels(cards) {
		if !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}
