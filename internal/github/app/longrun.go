package app

import (
	"context"
	"fmt"

	"github.com/google/go-github/v62/github"

	"github.com/perfgate/perfgate/internal/github/repoconfig"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// longRunCommand queues the capacity or soak tier on the PR (`/perf
// capacity`, `/perf soak`): a check run of its own, planned from the
// config's capacity: or soak: section.
func (h *issueCommentHandler) longRunCommand(ctx context.Context, client *github.Client, t prTarget, tier check.Tier, by, deliveryID string) (string, error) {
	cfg, msg, ok, err := h.runnable(ctx, client, t, tier, deliveryID)
	if !ok {
		return msg, err
	}
	if cfg.Full != nil && !longRunOn(cfg.Full, tier) {
		return fmt.Sprintf("`%s` has no `%s:` section, so there is no %s tier and nothing was run; see %s.", repoconfig.Path, tier, tier, check.DocsURL), nil
	}
	req := h.runRequest(t, cfg, tier, "/perf "+string(tier), by, deliveryID)
	if err := h.queueRun(ctx, req); err != nil {
		return "", err
	}
	what := "sweep `%s` and its base to their capacity knees"
	if tier == check.TierSoak {
		what = "soak `%s` under a steady load"
	}
	return fmt.Sprintf("Queued `%s`: perfgate will "+what+"; the check run shows the verdict.", check.CheckName(tier), rev.Short(t.headSHA)), nil
}

func longRunOn(c *config.Config, tier check.Tier) bool {
	if tier == check.TierSoak {
		return c.Soak.On
	}
	return c.Capacity.On
}
