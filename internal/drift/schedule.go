package drift

import (
	"context"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
)

// DefaultCron runs the pass daily, after a typical nightly has finished.
const DefaultCron = "30 5 * * *"

// Schedule runs the pass on the configured cron until ctx ends; stop
// waits for a running pass.
func (p *Pass) Schedule(ctx context.Context) (stop func(), err error) {
	spec := p.o.Config.Cron
	if spec == "" {
		spec = DefaultCron
	}
	c := cron.New()
	if _, err := c.AddFunc(spec, func() {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
		defer cancel()
		if _, err := p.Run(rctx); err != nil {
			p.o.Log.Error().Err(err).Msg("change-point pass")
		}
	}); err != nil {
		return nil, fmt.Errorf("change-point schedule %q: %w", spec, err)
	}
	c.Start()
	return func() { <-c.Stop().Done() }, nil
}
